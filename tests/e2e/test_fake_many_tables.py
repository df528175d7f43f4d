"""A checkpointed FakeSource of many tables runs as ONE streaming source (one Python data source,
one query) whose split descriptors name their table; each table's rows are made by the JVM from
a batch's logged offsets (connectors/fake/table_splits.py, docs/design/multi-table.md)."""

from __future__ import annotations

import glob
import os
import time

import pyarrow.parquet as pq
import pytest

from seatide import failpoints, intents
from seatide.config.loader import load_job_text
from seatide.plugin.base import ReadContext
from seatide.runtime.offset_log import logged_offsets
from seatide.store.jobs import request_stop
from tests.e2e.test_multi_table import job

pytestmark = pytest.mark.spark

FIELDS = "id = bigint, name = string, amount = double, day = date"


def many_tables(count: int) -> str:
    """``count`` tables of different sizes and split counts, numbered by ``id``."""
    tables = ", ".join(f'{{ row.num = {5 + i % 7}, split.num = {1 + i % 3}, sequence.field = id, '
                       f'schema {{ table = "db.t{i:02d}", fields {{ {FIELDS} }} }} }}' for i in range(count))
    return f'FakeSource {{ plugin_output = "many", tables_configs = [{tables}] }}'


def checkpointed(max_rows: int) -> str:
    return f"parallelism = 2\n  checkpoint.interval = 1000\n  micro-batch.max-rows = {max_rows}"


def sink(out) -> str:
    return f'LocalFile {{ path = "{out}/${{table_name}}", file_format_type = "parquet" }}'


def expected_rows(spark, count: int) -> dict[str, list]:
    """Each table's rows as the plain BATCH path makes them (spark.range), by table name: every
    table's own frame, named by a literal, in one job (the tables share their fields; a union of
    the tagged shape, a struct per table, costs Spark seconds of analysis at 30 tables)."""
    from functools import reduce

    from pyspark.sql import functions as F

    tables = load_job_text(job(many_tables(count), "Console {}", "parallelism = 2")).sources[0].plugin._tables
    ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=2, max_rows_per_batch=1_000_000,
                      read_interval_ms=0, plugin_id="source[0]")
    frames = [t.read(ctx).select(F.lit(t.declared_schema().table.split(".")[1]).alias("t"), "id", "name",
                                 "amount", "day") for t in tables]
    rows: dict[str, list] = {}
    for row in reduce(lambda a, b: a.unionByName(b), frames).collect():
        rows.setdefault(row["t"], []).append(tuple(row)[1:])
    return {name: sorted(values) for name, values in rows.items()}


def written_rows(out, name: str) -> list:
    """Every row of table ``name``'s target, sorted (a row written twice is there twice)."""
    rows = []
    for path in glob.glob(str(out / name / "**" / "*.parquet"), recursive=True):
        if "/." not in path[len(str(out)):]:           # published files only, no staging
            rows += [(r["id"], r["name"], r["amount"], r["day"]) for r in pq.read_table(path).to_pylist()]
    return sorted(rows)


def spark_offsets(local, batch_id: int) -> list:
    """Each source's end offset of ``batch_id`` in the job's one pipeline's Spark checkpoint."""
    dirs = glob.glob(os.path.join(local.data_dir, "**", "spark", "offsets"), recursive=True)
    assert len(dirs) == 1, dirs
    return logged_offsets(os.path.dirname(dirs[0]), batch_id)


def test_thirty_tables_run_as_one_streaming_source_and_every_table_gets_its_rows(local, spark, tmp_path):
    out = tmp_path / "out"
    run = local.run(job(many_tables(30), sink(out), checkpointed(max_rows=320)))
    assert run.status == "FINISHED", run.error
    first = spark_offsets(local, 0)
    assert len(first) == 1, f"{len(first)} streaming sources for 30 tables, not one"
    assert len(first[0]["units"]) == 30
    assert sum(n > 0 for n in first[0]["units"]) > 1, "a batch holds splits of several tables"
    expected = expected_rows(spark, 30)
    for name, rows in expected.items():
        assert written_rows(out, name) == rows, name
    assert len(run.checkpoints()) > 1


def test_a_stopped_job_of_many_tables_resumes_every_table_where_it_stood(local, spark, tmp_path, monkeypatch):
    out, gate = tmp_path / "out", tmp_path / "gate"
    # batches 0 and 1 run; batch 2 is held until the stop lets it go, then refused at its start
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start", f"gate:2:{gate}")
    monkeypatch.setitem(failpoints._HITS, "driver.batch_start", 0)

    def stop_after_two_checkpoints(store, job_id):
        from seatide.store.views import job_info

        deadline = time.time() + 120
        while time.time() < deadline:
            with store.read() as conn:
                if (job_info(conn, job_id)["checkpoint"]["completed"] or 0) >= 2:
                    break
            time.sleep(0.1)
        request_stop(store, job_id, savepoint=False, actor="test")

    text = job(many_tables(8), sink(out), checkpointed(max_rows=30))
    first = local.run(text, stop_after=stop_after_two_checkpoints)
    assert first.status == "CANCELED", first.error
    (done,) = spark_offsets(local, 1)          # one position for every table
    (held,) = spark_offsets(local, 2)          # the batch the resume replays
    assert len(done["units"]) == 8 and 0 < sum(done["units"]) < sum(held["units"])
    expected = expected_rows(spark, 8)
    written = sum(len(written_rows(out, name)) for name in expected)
    assert 0 < written < sum(len(rows) for rows in expected.values()), "the job stopped mid-way"
    gate.touch()
    intents.resume(local.store, first.job_id, actor="test")
    second = local.drive(first.job_id)
    assert second.status == "FINISHED", second.error
    for name, rows in expected.items():
        assert written_rows(out, name) == rows, name      # every row once, as the plain path makes it
