"""Rows read, as a checkpointed pipeline counts them: from Spark's own count of its scan when
every source is Spark's scan of its rows, from an observation of each source's rows otherwise."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seatide.connectors.file.source import LocalFileSource
from seatide.plugin.options import read_options
from tests.e2e.test_time_in_streams import stop_when_rows_written

pytestmark = pytest.mark.spark


def land_files(directory: str, rows_per_file: list[int], prefix: str = "part") -> None:
    os.makedirs(directory, exist_ok=True)
    start = 0
    for n, rows in enumerate(rows_per_file):
        aside = os.path.join(directory, f".{prefix}-{n}.parquet")   # whole when a stream lists it
        pq.write_table(pa.table({"id": pa.array(range(start, start + rows), pa.int64())}), aside)
        os.rename(aside, os.path.join(directory, f"{prefix}-{n}.parquet"))
        start += rows


def files_job(source: str, out: str, extra_source: str = "", transform: str = "", sinks: int = 1,
              env: str = "job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 1") -> str:
    into = "o" if transform else "t"
    sink_blocks = "\n".join(f'LocalFile {{ plugin_input = "{into}", path = "{out}/{n}", file_format_type = "parquet" }}'
                             for n in range(sinks))
    return f"""
env {{ {env}, parallelism = 1 }}
source {{ LocalFile {{ plugin_output = "t", path = "{source}", file_format_type = "parquet" {extra_source} }} }}
{f'transform {{ Sql {{ plugin_input = "t", plugin_output = "o", query = "{transform}" }} }}' if transform else ""}
sink {{ {sink_blocks} }}
"""


def test_a_file_stream_counts_its_rows_by_sparks_own_count(local, tmp_path):
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    land_files(source, [3, 5, 7])
    run = local.run(files_job(source, out))
    assert run.status == "FINISHED", run.error
    assert len(run.checkpoints()) == 3          # one file a batch: each batch's count is its own
    (pipeline,) = run.pipelines()
    assert (pipeline.rows_read, pipeline.rows_written) == (15, 15)
    assert sum(c.rows for c in run.checkpoints()) == 15


def test_rows_a_file_filter_drops_after_the_scan_are_not_counted_as_read(local, tmp_path):
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    land_files(source, [4, 6])
    land_files(source, [100], prefix="skip")    # not the filter's: not read, so not counted
    run = local.run(files_job(source, out, extra_source=', file_filter_pattern = "part-.*"'))
    assert run.status == "FINISHED", run.error
    (pipeline,) = run.pipelines()
    assert (pipeline.rows_read, pipeline.rows_written) == (10, 10)


@pytest.mark.parametrize("transform, sinks, written", [
    ("select * from t where id >= 10", 1, 5),      # pushed into the scan: Spark would count 5
    ("select id from t union all select id + 100 as id from t", 1, 30),  # two scans: Spark would count 30
    ("", 2, 30),                                    # one branch a sink, each its own scan
])
def test_a_pipeline_spark_would_count_wrong_counts_its_rows_itself(local, tmp_path, transform, sinks, written):
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    land_files(source, [3, 5, 7])
    run = local.run(files_job(source, out, transform=transform, sinks=sinks))
    assert run.status == "FINISHED", run.error
    (pipeline,) = run.pipelines()
    assert (pipeline.rows_read, pipeline.rows_written) == (15, written)


@pytest.mark.parametrize("point", ["driver.after_sink_commit", "driver.after_checkpoint"])
@pytest.mark.parametrize("transform", ["", "select * from t where id >= 3"])
def test_a_batch_replayed_after_a_crash_is_counted_once(local, tmp_path, monkeypatch, point, transform):
    # The attempt dies once the sink decided the batch, before its progress counted the rows;
    # the next one finds the decision standing and writes nothing.
    from seatide import failpoints

    monkeypatch.setitem(failpoints._POINTS, point, f"once:raise:{tmp_path / 'crashed'}")
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    land_files(source, [3, 5, 7])
    run = local.run(files_job(source, out, transform=transform))
    assert run.status == "FINISHED", run.error
    assert os.path.exists(tmp_path / "crashed") and len(run.attempts()) == 2
    (pipeline,) = run.pipelines()
    assert (pipeline.rows_read, pipeline.rows_written) == (15, 12 if transform else 15)


def idle_progress_seen(spark, deadline_s: float = 60.0) -> None:
    """Waits for a running query's progress of an idle trigger (no batch run: no addBatch)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for query in spark.streams.active:
            if any(p.batchId > 0 and "addBatch" not in p.durationMs for p in query.recentProgress):
                return
        time.sleep(0.1)
    raise AssertionError("no idle progress within the deadline")


def test_a_batch_after_an_idle_spell_is_counted(spark, local, tmp_path):
    # An idle stream reports progress now and then under the id of the batch it has not run.
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    land_files(source, [3])

    def land_after_idle(store, job_id):
        idle_progress_seen(spark)                   # batch 0 ran; an idle trigger since
        land_files(source, [4], prefix="late")
        stop_when_rows_written(7)(store, job_id)

    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")
    try:
        run = local.run(files_job(source, out, env="job.mode = STREAMING, checkpoint.interval = 500"),
                        stop_after=land_after_idle)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    (pipeline,) = run.pipelines()
    assert (pipeline.rows_read, pipeline.rows_written) == (7, 7)


@pytest.mark.parametrize("options, counted", [
    ({"file_format_type": "parquet"}, True),
    ({"file_format_type": "csv", "schema": {"fields": {"id": "int"}}, "skip_header_row_number": 1}, True),
    # two header lines: whole files are split into lines here, after Spark's scan
    ({"file_format_type": "csv", "schema": {"fields": {"id": "int"}}, "skip_header_row_number": 2}, False),
    ({"file_format_type": "parquet", "file_filter_pattern": "a.*"}, False),
])
def test_a_file_source_is_counted_by_spark_only_when_its_scan_is_its_rows(tmp_path, options, counted):
    source = LocalFileSource(read_options({"path": str(tmp_path), **options}, LocalFileSource.options))
    assert source.counted_by_spark() is counted
