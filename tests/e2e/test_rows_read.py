"""Rows read, as a checkpointed pipeline counts them: from Spark's own count of its scan when
every source is Spark's scan of its rows, from an observation of each source's rows otherwise."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seatide.connectors.file.source import LocalFileSource
from seatide.plugin.options import read_options

pytestmark = pytest.mark.spark


def land_files(directory: str, rows_per_file: list[int], prefix: str = "part") -> None:
    os.makedirs(directory, exist_ok=True)
    start = 0
    for n, rows in enumerate(rows_per_file):
        pq.write_table(pa.table({"id": pa.array(range(start, start + rows), pa.int64())}),
                       os.path.join(directory, f"{prefix}-{n}.parquet"))
        start += rows


def files_job(source: str, out: str, extra_source: str = "") -> str:
    return f"""
env {{ job.mode = BATCH, parallelism = 1, checkpoint.interval = 1000, micro-batch.max-rows = 1 }}
source {{ LocalFile {{ path = "{source}", file_format_type = "parquet" {extra_source} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet" }} }}
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
