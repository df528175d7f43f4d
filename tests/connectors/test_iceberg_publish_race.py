"""Two drivers publishing one decided Iceberg batch at once (a zombie and its replacement rolling
the batch forward) never delete each other's files (review of the sinks, finding 3)."""

from __future__ import annotations

import pytest

from seatide import failpoints
from seatide.plugin.rowkind import RowKind
from seatide.testing.cluster import wait_for
from tests.connectors.iceberg_helpers import Held, changes, read_back, routed_writer, write_routed
from tests.connectors.test_iceberg_concurrency import DDL, KEYED, SHARDS, another_engine_deletes, in_thread

pytestmark = pytest.mark.spark

I, UA = RowKind.INSERT, RowKind.UPDATE_AFTER


def test_two_drivers_restaging_one_decided_batch_on_a_moved_head_keep_the_committed_files(
        spark, tmp_path, monkeypatch):
    """Purpose: a copy-on-write batch whose head moved after its decision is staged again by each
    driver that publishes it; the first to commit keeps its files whatever the second stages.

    How: batch 1 rewrites key 3's file; driver A decides it and is held after the decision while
    another engine deletes key 9 (the head moves). A stages the rewrite again for the new head and
    is held before its commit (``iceberg.before_commit``); driver B (a second writer of the same
    sink and log) publishes the same decided batch, stages it again for the same head, and is held
    before its commit. A commits; then B goes on (it finds the batch committed).
    Passing: the table reads back every row (key 3 updated, key 9 deleted): no committed file is gone.
    """
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    log = tmp_path / "log"
    write_routed(routed_writer(spark, config, SHARDS, **KEYED), log,
                 {0: changes(spark, [(i, f"a{i}", I) for i in range(10)], DDL)}, 0)
    decided = Held(monkeypatch, "sink.after_decision", tmp_path / "decided")
    batch = {1: changes(spark, [(3, "a3-new", UA)], DDL)}
    a, a_out = in_thread(lambda: write_routed(routed_writer(spark, config, SHARDS, **KEYED), log, batch, 1))
    b = None
    try:
        decided.reached()
        another_engine_deletes(config, tmp_path, [9])
        monkeypatch.setitem(failpoints._POINTS, "iceberg.before_commit", f"gate:0:{tmp_path / 'a-commits'}")
        monkeypatch.setitem(failpoints._HITS, "iceberg.before_commit", 0)
        decided.release()
        wait_for(lambda: failpoints._HITS["iceberg.before_commit"] >= 1, 180, 0.05, "A before its commit")
        monkeypatch.setitem(failpoints._POINTS, "iceberg.before_commit", f"gate:1:{tmp_path / 'b-commits'}")
        b, b_out = in_thread(lambda: write_routed(routed_writer(spark, config, SHARDS, **KEYED), log, batch, 1))
        wait_for(lambda: failpoints._HITS["iceberg.before_commit"] >= 2 or not b.is_alive(), 180, 0.05,
                 "B before its commit")
        open(tmp_path / "a-commits", "w").close()
        a.join(timeout=300)
    finally:
        for gate in ("decided", "a-commits", "b-commits"):
            open(tmp_path / gate, "w").close()
        a.join(timeout=300)
        if b is not None:
            b.join(timeout=300)
    assert "error" not in a_out and "error" not in b_out, (a_out, b_out)
    expected = {i: f"a{i}" for i in range(9)} | {3: "a3-new"}
    assert read_back(spark, config) == sorted(expected.items()), "a committed file of the batch is gone"
