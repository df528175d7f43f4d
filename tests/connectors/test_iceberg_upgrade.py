"""A job resumed across the Iceberg sink's port to the one sink protocol: its commit log holds
the records of the writer before (``connectors/iceberg/writer.py``, gone), and it goes on.

Those records: a single table's state ``{"rows", "total_rows"}``, a route list's ``{"rows",
"tables": {namespace.table: state}}``, and a decided manifest's parts ``{"tables":
{namespace.table: part}}`` (each part as a target stages it today). The old attempt committed
batch 0 and died after deciding batch 1; the resumed job rolls batch 1 forward, makes no save
mode again (its DROP_DATA would empty batch 0's rows) and writes batch 2.
"""

from __future__ import annotations

import pytest

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.plugin.base import Batch
from seatide.plugin.sink_protocol import SaveModeDoor, SinkRun
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.plugin.target_rows import RoutePart, TargetRows
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, roll_forward
from tests.connectors.iceberg_helpers import (batch_snapshots, context, make_sink, open_sink, rows_of, table_of,
                                              txn, write)

pytestmark = pytest.mark.spark
DROP = {"data_save_mode": "DROP_DATA"}


def ids(spark, values):
    return spark.createDataFrame([(i, f"n{i}") for i in values], "id bigint, name string")


def old_part(targets, index: int, df, batch: int, previous: dict) -> dict:
    """What the old writer decided for route ``index``'s table in ``batch`` (its part)."""
    frames = TableFrames({index: df}, schema_of=lambda _i: df.schema)
    route = targets.routes[index]
    target = targets.target(targets.key_of[index])
    batch = Batch(batch_id=batch, transaction_id=txn(batch), previous_state=previous)
    return target.stage(TargetRows((RoutePart(route, batch.transaction_id, frames),), frames), batch).publish


def old_batches(spark, config: dict):
    """A single-table DROP_DATA sink whose batch 0 (ids 0, 1) is published and whose batch 1 (ids
    2, 3) is staged: its target key and batch 1's part, for the caller to commit and decide in the
    shapes of the version it stands for."""
    old = open_sink(make_sink(config, **DROP), context(spark))
    [key] = old.keys()
    old.target(key).ensure(ids(spark, []).schema)
    old.target(key).publish(old_part(old, 0, ids(spark, [0, 1]), 0, {}))
    return key, old_part(old, 0, ids(spark, [2, 3]), 1, {"rows": 2, "total_rows": 2})


def test_a_single_table_job_resumes_from_the_old_writers_commit_log(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    log = SinkCommitLog(str(tmp_path / "log"))
    key, part = old_batches(spark, config)
    log.commit(0, {"rows": 2, "total_rows": 2})
    FileDecisions(log).decide(1, txn(1), {"publish": {"tables": {"ns.t": part}},
                                          "state": {"rows": 2, "total_rows": 4}})

    resumed = open_sink(make_sink(config, **DROP), context(spark))
    assert roll_forward(resumed, log, FileDecisions(log)) == [1]
    result = write(resumed, tmp_path / "log", ids(spark, [4, 5]), 2)
    assert [r[0] for r in rows_of(config, columns=("id",))] == list(range(6)), "a save mode was made again"
    assert batch_snapshots(config) == [txn(0), txn(1), txn(2)]
    assert result.state == {"rows": 2, "total_rows": 6, "targets": {key: {"rows": 2, "total_rows": 6}}}


def test_a_multi_table_job_resumes_from_the_old_writers_commit_log(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    log = SinkCommitLog(str(tmp_path / "log"))

    def opened():
        routes = [TableRoute(i, f"shop.{name}", None, make_sink(config, table=name, **DROP))
                  for i, name in enumerate(("a", "b"))]
        return open_sink(routes[0].sink, context(spark), routes)

    old = opened()
    parts = {}
    for index, name in enumerate(("a", "b")):
        old.target(old.key_of[index]).ensure(ids(spark, []).schema)
        old.target(old.key_of[index]).publish(old_part(old, index, ids(spark, [10 * index]), 0, {}))
        parts[f"ns.{name}"] = old_part(old, index, ids(spark, [10 * index + 1]), 1, {"rows": 1, "total_rows": 1})
    log.commit(0, {"rows": 2, "tables": {"ns.a": {"rows": 1, "total_rows": 1}, "ns.b": {"rows": 1, "total_rows": 1}}})
    FileDecisions(log).decide(1, txn(1), {"publish": {"tables": parts}, "state": {
        "rows": 2, "tables": {"ns.a": {"rows": 1, "total_rows": 2}, "ns.b": {"rows": 1, "total_rows": 2}}}})

    resumed = opened()
    assert roll_forward(resumed, log, FileDecisions(log)) == [1]
    frames = {0: ids(spark, [2]), 1: ids(spark, [12])}
    result = write(resumed, tmp_path / "log", TableFrames(frames, schema_of=lambda _i: frames[0].schema), 2)
    assert [r[0] for r in rows_of(config, "ns.a", ("id",))] == [0, 1, 2], "a save mode was made again"
    assert [r[0] for r in rows_of(config, "ns.b", ("id",))] == [10, 11, 12]
    assert batch_snapshots(config, "ns.a") == batch_snapshots(config, "ns.b") == [txn(0), txn(1), txn(2)]
    assert result.state["targets"] == {resumed.key_of[0]: {"rows": 1, "total_rows": 3},
                                       resumed.key_of[1]: {"rows": 1, "total_rows": 3}}


# -- save-mode decisions of the job recorded before the port --------------------------------------
# The old writer named a table's decision ``door.key_of("iceberg:<catalog_name>:<namespace.table>")``
# (``Batch.target_save_modes_key``): RECREATE_SCHEMA as ``{"table_uuid": U}`` under it (its token in
# the table's ``seatide.recreated-by``), DROP_DATA as ``{"remove": [files]}`` under it + "_data".
OLD_IDENTITY = "iceberg:default:ns.t"


def old_records(tmp_path):
    shared = FileDecisions(SinkCommitLog(str(tmp_path / "jobrecords")))     # the job's, every pipeline's
    return shared, SaveModeDoor(shared, "S_job").key_of(OLD_IDENTITY)


def run_of(targets, log_dir, shared) -> SinkRun:
    log = SinkCommitLog(str(log_dir))
    return SinkRun(targets, log, FileDecisions(log), SaveModeDoor(shared, "S_job"), transaction_prefix="")


def test_an_old_drop_data_decision_is_carried_out_as_it_names_and_never_planned_again(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    shared, old_key = old_records(tmp_path)
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0)
    before = [t.file.file_path for t in table_of(config).scan().plan_files()]
    shared.decide_once(old_key + "_data", {"remove": before})    # pipeline 1's decision (not carried out yet)
    p1 = open_sink(make_sink(config), context(spark, plugin="sink[0]"))
    write(p1, tmp_path / "p1", ids(spark, [0, 1]), 0)              # then its rows (as APPEND: no second plan)

    p2 = open_sink(make_sink(config, **DROP), context(spark, plugin="sink[1]"))     # pipeline 2, upgraded
    run_of(p2, tmp_path / "p2", shared).write(ids(spark, [5]), 0, txn(0, job="job2"))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [0, 1, 5]


def test_an_old_recreate_decision_is_carried_out_once(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    shared, old_key = old_records(tmp_path)
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0,
          job="before")
    shared.decide_once(old_key, {"table_uuid": str(table_of(config).metadata.table_uuid)})   # killed before _recreate
    recreate = {"schema_save_mode": "RECREATE_SCHEMA"}

    run_of(open_sink(make_sink(config, **recreate), context(spark)), tmp_path / "p", shared).write(
        ids(spark, [1]), 0, txn(0))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1], "the decided RECREATE_SCHEMA was never made"
    # another pipeline of the job (no state of its own) finds the decision carried out
    run_of(open_sink(make_sink(config, **recreate), context(spark, plugin="sink[1]")), tmp_path / "q", shared).write(
        ids(spark, [2]), 0, txn(0, job="job2"))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1, 2], "RECREATE_SCHEMA made twice"


def test_an_old_recreate_decision_of_a_table_dropped_since_makes_it_anew(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    shared, old_key = old_records(tmp_path)
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0)
    shared.decide_once(old_key, {"table_uuid": str(table_of(config).metadata.table_uuid)})
    load_catalog("default", config).drop_table("ns.t")
    run_of(open_sink(make_sink(config, schema_save_mode="RECREATE_SCHEMA"), context(spark)), tmp_path / "p",
           shared).write(ids(spark, [1]), 0, txn(0))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1]


@pytest.mark.parametrize("mode", [DROP, {"schema_save_mode": "RECREATE_SCHEMA"}], ids=["DROP_DATA", "RECREATE_SCHEMA"])
def test_rows_the_old_writer_committed_without_a_decision_keep_the_save_modes_made(spark, tmp_path, mode):
    """Finding N1: the old writer recorded no decision where its save modes destroyed nothing (the
    table missing): its pipeline 1 made the table and committed rows under the job run's
    transaction ids. Pipeline 2, upgraded and not prepared before, finds the run's mark in the
    table: the save modes were made, and it destroys nothing the job wrote."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    shared, _ = old_records(tmp_path)
    old = open_sink(make_sink(config, **mode), context(spark))
    [key] = old.keys()
    old.target(key).ensure(ids(spark, []).schema)       # made by the old writer, recording nothing
    old.target(key).publish(old_part(old, 0, ids(spark, [0, 1]), 0, {}))

    upgraded = open_sink(make_sink(config, **mode), context(spark, plugin="sink[1]"))
    run_of(upgraded, tmp_path / "p2", shared).write(ids(spark, [5]), 0, txn(0, "L2"))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [0, 1, 5]
