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

from seatide.plugin.base import Batch
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.plugin.target_rows import RoutePart, TargetRows
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, roll_forward
from tests.connectors.iceberg_helpers import (batch_snapshots, context, make_sink, open_sink, rows_of, txn,
                                              write)

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


def test_a_single_table_job_resumes_from_the_old_writers_commit_log(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    log = SinkCommitLog(str(tmp_path / "log"))
    old = open_sink(make_sink(config, **DROP), context(spark))
    [key] = old.keys()
    old.target(key).ensure(ids(spark, []).schema)
    old.target(key).publish(old_part(old, 0, ids(spark, [0, 1]), 0, {}))
    log.commit(0, {"rows": 2, "total_rows": 2})
    part = old_part(old, 0, ids(spark, [2, 3]), 1, {"rows": 2, "total_rows": 2})
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
    assert result.state["targets"] == {"iceberg:default:ns.a": {"rows": 1, "total_rows": 3},
                                       "iceberg:default:ns.b": {"rows": 1, "total_rows": 3}}
