"""Helpers for transform tests: small DataFrames with row kinds, a file stream, job text.

The two plugins below exist only so ``load_job_text`` can validate a transform inside a
whole job (a job needs a source and a sink); they never read or write rows.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from seatide.plugin.base import Sink, Source
from seatide.plugin.options import STRING_LIST, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind


@register
class TransformTestSource(Source):
    """Declares which row kinds it emits (``kinds``); validation-only."""

    plugin_name = "TransformTestSource"
    options = (Option("kinds", STRING_LIST, ["INSERT"], "row kinds this source claims to emit"),)

    def row_kinds(self):
        return frozenset(RowKind.parse(k) for k in self.opts["kinds"])


@register
class TransformTestSink(Sink):
    """Accepts only the row kinds listed in ``accepts``; validation-only."""

    plugin_name = "TransformTestSink"
    options = (Option("accepts", STRING_LIST, ["INSERT"], "row kinds this sink can apply"),)

    def __init__(self, opts, parallelism=1, env=None):
        super().__init__(opts, parallelism, env)
        self.accepted_row_kinds = frozenset(RowKind.parse(k) for k in opts["accepts"])


def job_text(transform: str, kinds: str = "INSERT", accepts: str = "INSERT") -> str:
    """A whole job around one transform block (HOCON)."""
    return f"""
env {{ job.mode = "BATCH" }}
source {{ TransformTestSource {{ plugin_output = "fake", kinds = [{kinds}] }} }}
transform {{
{transform}
}}
sink {{ TransformTestSink {{ accepts = [{accepts}] }} }}
"""


def transform_from(transform: str):
    """Build the transform plugin of ``transform`` (a HOCON block) through the job loader."""
    from seatide.config.loader import load_job_text

    return load_job_text(job_text(transform)).transforms[0].plugin


def frame(spark, rows: list[tuple], schema: str):
    """A DataFrame of ``rows``; each row's last value is its RowKind (stored as __row_kind)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(*r[:-1], int(r[-1])) for r in rows], f"{schema}, _kind int")
    return df.withColumn(ROW_KIND_COLUMN, F.col("_kind").cast("tinyint")).drop("_kind")


def rows_of(df) -> list[tuple]:
    """Rows as tuples, the row kind as a RowKind, in a stable order."""
    out = [tuple(r)[:-1] + (RowKind(r[-1]),) for r in df.collect()]
    return sorted(out, key=repr)


class StreamRun:
    """Runs a transform over a real file stream (availableNow) and collects what arrives."""

    def __init__(self, spark, tmp_path):
        self.spark, self.tmp_path = spark, tmp_path
        self.rows: list = []
        self.columns: list[str] = []
        self._lock = threading.Lock()

    def run(self, records: list[dict], schema: str, transform, input_name: str = "fake"):
        from pyspark.sql import functions as F

        from seatide.plugin.base import TransformContext

        source = self.tmp_path / "in"
        source.mkdir(exist_ok=True)
        with open(source / "part-0.json", "w") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in records)
        df = self.spark.readStream.schema(f"{schema}, kind int").json(str(source))
        df = df.withColumn(ROW_KIND_COLUMN, F.col("kind").cast("tinyint")).drop("kind")
        assert df.isStreaming
        ctx = TransformContext(spark=self.spark, input_name=input_name, output_name="out",
                               micro_batch=True)
        out = transform.apply(df, ctx)
        assert out.isStreaming
        query = (out.writeStream.foreachBatch(self._collect).trigger(availableNow=True)
                 .option("checkpointLocation", os.path.join(self.tmp_path, "checkpoint")).start())
        query.awaitTermination(120)
        assert not query.isActive, "the stream did not finish within 120 s"
        if query.exception():
            raise query.exception()
        return sorted((tuple(r)[:-1] + (RowKind(r[-1]),) for r in self.rows), key=repr)

    def _collect(self, batch, batch_id):
        rows = batch.collect()
        with self._lock:
            self.columns = batch.columns
            self.rows.extend(rows)


@pytest.fixture
def stream(spark, tmp_path):
    return StreamRun(spark, tmp_path)


@pytest.fixture
def ctx(spark):
    from seatide.plugin.base import TransformContext

    return TransformContext(spark=spark, input_name="fake", output_name="out", micro_batch=False)
