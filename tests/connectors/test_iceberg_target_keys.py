"""Which Iceberg table a route writes: its catalog (where the catalog keeps its tables), its
catalog name and its ``namespace.table``. Routes alike in all three are one target (shards of one
table); routes whose catalogs differ are different tables, even under one catalog name and table
name. Records of the version whose key named only the catalog name and the table (its states,
decided manifests and save-mode decisions under ``iceberg:<catalog_name>:<namespace.table>``) are
still read as the table's."""

from __future__ import annotations

import pytest

from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, roll_forward
from tests.connectors.iceberg_helpers import (batch_snapshots, context, make_sink, open_sink, rows_of, table_of,
                                              txn, write)
from tests.connectors.test_iceberg_upgrade import DROP, ids, old_batches

EARLIER_KEY = "iceberg:default:ns.t"      # the key before it named the catalog's location


@pytest.mark.spark
def test_routes_into_two_warehouses_under_one_catalog_name_are_two_tables(spark, tmp_path):
    a = {"type": "hadoop", "warehouse": f"file://{tmp_path}/whA"}
    b = {"type": "hadoop", "warehouse": f"file://{tmp_path}/whB"}      # as warehouse = ".../${database_name}" gives
    routes = [TableRoute(0, "db1.t", None, make_sink(a)), TableRoute(1, "db2.t", None, make_sink(b))]
    targets = open_sink(routes[0].sink, context(spark), routes)
    assert len(targets.keys()) == 2
    frames = {0: ids(spark, [1]), 1: ids(spark, [2])}
    write(targets, tmp_path / "log", TableFrames(frames, schema_of=lambda _i: frames[0].schema), 0)
    assert [r[0] for r in rows_of(a, columns=("id",))] == [1]
    assert [r[0] for r in rows_of(b, columns=("id",))] == [2]


@pytest.mark.spark
def test_a_save_mode_decision_under_the_earlier_key_is_the_tables(spark, tmp_path):
    """The earlier version decided DROP_DATA (named files) and died before its first batch: the
    resumed job carries out that decision, never a new one that would take in rows written since."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0)
    before = [t.file.file_path for t in table_of(config).scan().plan_files()]
    log = SinkCommitLog(str(tmp_path / "log"))
    door = SaveModeDoor(FileDecisions(log), "S_" + txn(0).rsplit("_", 1)[0])     # write()'s scope
    door.records.decide_once(door.key_of(EARLIER_KEY), {"target": EARLIER_KEY, "destroy": {"remove": before}})
    write(open_sink(make_sink(config), context(spark, plugin="other")), tmp_path / "other", ids(spark, [7]), 0)

    write(open_sink(make_sink(config, **DROP), context(spark)), tmp_path / "log", ids(spark, [1]), 0)
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1, 7]


@pytest.mark.spark
def test_a_job_resumes_from_states_and_a_decision_under_the_earlier_key(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    log = SinkCommitLog(str(tmp_path / "log"))
    key, part = old_batches(spark, config)
    log.commit(0, {"rows": 2, "total_rows": 2, "targets": {EARLIER_KEY: {"rows": 2, "total_rows": 2}}})
    FileDecisions(log).decide(1, txn(1), {"publish": {"targets": {EARLIER_KEY: part}}, "state": {
        "rows": 2, "total_rows": 4, "targets": {EARLIER_KEY: {"rows": 2, "total_rows": 4}}}})

    resumed = open_sink(make_sink(config, **DROP), context(spark))
    assert roll_forward(resumed, log, FileDecisions(log)) == [1]
    result = write(resumed, tmp_path / "log", ids(spark, [4, 5]), 2)
    assert [r[0] for r in rows_of(config, columns=("id",))] == list(range(6)), "a save mode was made again"
    assert batch_snapshots(config) == [txn(0), txn(1), txn(2)]
    assert result.state["targets"] == {key: {"rows": 2, "total_rows": 6}}


def test_a_catalogs_location_leaves_out_credentials_and_spelling():
    from seatide.connectors.iceberg.catalogs import catalog_location

    pg = {"type": "jdbc", "uri": "jdbc:postgresql://db:5432/cat", "jdbc.user": "u", "jdbc.password": "one"}
    assert catalog_location(pg) == catalog_location({**pg, "jdbc.password": "two", "jdbc.user": "v"})
    assert catalog_location(pg) != catalog_location({**pg, "uri": "jdbc:postgresql://db:5432/other"})
    assert catalog_location({"type": "hadoop", "warehouse": "file:///w/a/"}) == \
        catalog_location({"type": "hadoop", "warehouse": "/w/a"})
    rest = {"type": "rest", "uri": "http://cat:8181", "warehouse": "w1", "token": "t1"}
    assert catalog_location(rest) == catalog_location({**rest, "token": "t2"})
    assert catalog_location(rest) != catalog_location({**rest, "warehouse": "w2"})
