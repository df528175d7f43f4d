"""runtime.local_batch: a single table's small micro-batch, offered to its sink collected on the
driver, is read only when the sink asks, once; a Jdbc sink that cannot stage its types itself
never asks (its Spark write reads the batch once, as before)."""

from __future__ import annotations

import pytest

from seatide.plugin.rowkind import RowKind
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime import local_batch
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    context, db, frame, make_sink, query, spark_jobs_of, table_name, write)

pytestmark = pytest.mark.spark


def _cdc_source():
    """A one-table Postgres-CDC source as a job builds it (its offsets are all it is asked about)."""
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan

    job = load_job_text('env { job.mode = "STREAMING" }\nsource { Postgres-CDC { base-url = '
                        '"jdbc:postgresql://127.0.0.1:1/test", username = "u", password = "", '
                        'table-names = ["test.public.unreached"], connect.timeout.ms = 1000 } }\nsink { Console {} }')
    return build_plan(job).pipelines[0].sources[0].plugin


def _change_end(changes: int, size: int, **more) -> dict:
    return {"lsn": 100, "snapshot": None, "splits": [], "changes": changes, "bytes": size, "tables": ["public.t"],
            **more}


def _counted(spark, df):
    """``df`` with each read of its rows counted (an accumulator)."""
    reads = spark.sparkContext.accumulator(0)

    def one(row):
        reads.add(1)
        return row

    return spark.createDataFrame(df.rdd.map(one).coalesce(1), df.schema), reads


def test_only_a_change_batch_the_source_bounds_within_the_drivers_share_is_offered(spark, monkeypatch):
    source = _cdc_source()
    df = frame(spark, [(1, "a", RowKind.INSERT)], "id bigint, name string")
    assert local_batch.offered(df, source, None) is None
    assert local_batch.offered(df, source, {**_change_end(5, 100), "splits": [{"table": 0}]}) is None   # a snapshot
    assert local_batch.offered(df, source, _change_end(5, 100, lookups=True)) is None   # values read by key
    monkeypatch.setattr(local_batch, "LOCAL_BATCH_ROWS", 4)
    assert local_batch.offered(df, source, _change_end(5, 100)) is None
    assert local_batch.offered(df, source, _change_end(4, 100)) is not None


def test_the_offered_rows_are_read_when_first_asked_for_and_once(spark):
    df, reads = _counted(spark, frame(spark, [(1, "a", RowKind.INSERT), (2, "b", RowKind.DELETE)],
                                      "id bigint, name string"))
    offered = local_batch.offered(df, _cdc_source(), _change_end(3, 100))
    assert reads.value == 0 and 0 in offered.local and offered.schema_of(0) == df.schema
    assert [tuple(r) for r in offered.local[0]] == [(1, "a", 0), (2, "b", 3)]
    assert offered.local.get(0) is offered.local[0] and reads.value == 2


def test_a_jdbc_sink_stages_an_offered_batch_itself_in_one_spark_job(spark, db, tmp_path):
    table = table_name()
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    df = frame(spark, [(1, "a", RowKind.INSERT), (2, "b", RowKind.INSERT), (1, "a2", RowKind.UPDATE_AFTER)],
               "id bigint, name string")
    offered = local_batch.offered(df, _cdc_source(), _change_end(3, 100))
    results = []
    assert len(spark_jobs_of(spark, lambda: results.append(write(writer, tmp_path, offered, 0)))) == 1   # the collect
    assert results[0].state["rows"] == 3
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "a2"), (2, "b")]


def test_a_jdbc_sink_that_stages_a_type_by_spark_never_collects_the_offered_rows(spark, db, tmp_path):
    """An array is staged by Spark's writer alone (local_rows.columns): the sink must not ask for
    the collected rows first, or the batch is read twice, its CDC slot range streamed twice."""
    table = table_name()
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    df, reads = _counted(spark, frame(spark, [(1, [1, 2], RowKind.INSERT), (2, [3], RowKind.INSERT)],
                                      "id bigint, tags array<int>"))
    write(writer, tmp_path, local_batch.offered(df, _cdc_source(), _change_end(2, 100)), 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(2,)]
    assert reads.value == 2


def test_a_batch_with_a_value_python_cannot_hold_is_staged_by_spark(spark, db, tmp_path):
    """0001-01-01T00:00:00Z (a PostgreSQL -infinity clamped) has no ``datetime`` on the driver:
    the collect fails, and the batch must go the way Spark's writer takes it, not fail for ever."""
    from pyspark.sql import functions as F

    if "postgresql" not in db[0]:
        pytest.skip("MySQL's DATETIME starts at year 1000")
    table = table_name()
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    df = frame(spark, [(1, RowKind.INSERT), (2, RowKind.INSERT)], "id bigint").withColumn(
        "at", F.when(F.col("id") == 1, F.timestamp_seconds(F.lit(-62135596800))).otherwise(
            F.timestamp_seconds(F.lit(0))))
    write(writer, tmp_path, local_batch.offered(df, _cdc_source(), _change_end(2, 100)), 0)
    assert query(db, f"SELECT id, EXTRACT(EPOCH FROM at)::bigint FROM {table} ORDER BY id") == \
        [(1, -62135596800), (2, 0)]
