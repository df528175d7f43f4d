"""A Paimon warehouse reached through a symlink and directly is one warehouse, as a LocalFile
directory is (outside review 8b, F9): the table's key names the warehouse's real path, so two
sinks spelling it two ways share one target and one save-mode decision. The key as spelled before
stays the table's earlier key: its save-mode decision, states and decided parts."""

from __future__ import annotations

import os

from seatide.plugin.sink_protocol import open_sink
from tests.connectors.paimon_helpers import make_sink


def _linked(tmp_path):
    (tmp_path / "wh").mkdir()
    os.symlink(tmp_path / "wh", tmp_path / "link")
    return f"{tmp_path}/wh", f"{tmp_path}/link"


def test_a_warehouse_through_a_symlink_and_directly_is_one_table(tmp_path):
    real, link = _linked(tmp_path)
    assert open_sink(make_sink(link), None).keys() == open_sink(make_sink(real), None).keys() == [f"{real}#db.t"]


def test_records_under_the_spelled_key_are_the_tables(tmp_path):
    real, link = _linked(tmp_path)
    targets = open_sink(make_sink(link), None)
    spelled, key = f"{link}#db.t", f"{real}#db.t"
    assert targets.previous_targets({"targets": {spelled: {"total_rows": 2}}}) == {key: {"total_rows": 2}}
    assert targets.publish_parts({"targets": {spelled: {"files": []}}}) == [(key, {"files": []})]
    assert list(targets.target(key).earlier_keys) == [spelled]
