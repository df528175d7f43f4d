"""Spark's refusals of a streaming query that come at ``writeStream.start``, asked ahead of it.

``DataStreamWriter.start`` runs Spark's ``UnsupportedOperationChecker`` over the analysed plan (a sort
of a stream, a stream-stream join without a watermark, ...): a refusal no batch has run for yet, and
no retry can fix. The driver asks it of every pipeline of an attempt before any query starts
(``runtime.pipeline_start``): started one after another, a pipeline refused here came after the
pipelines before it had run their first batch, and their DROP_DATA, for a job that then failed.

A query is started in append mode and, when Spark refuses that mode for it (a stateful SQL transform:
an aggregation without watermark), in update mode: the check asks the same two in the same order.
"""

from __future__ import annotations


def append_refused(exc: BaseException) -> bool:
    """Spark refused the append output mode for this query (and update mode may do)."""
    return "append output mode not supported" in str(exc).lower() or "OUTPUT_MODE" in str(exc)


def check_stream(df) -> None:
    """Raise what ``df.writeStream...start()`` would raise for its plan (an AnalysisException), without
    starting anything. Skipped where Spark's own check is turned off or there is no JVM to ask (Spark
    Connect): the start itself refuses then, as before."""
    spark = df.sparkSession
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or not df.isStreaming:
        return
    if str(spark.conf.get("spark.sql.streaming.unsupportedOperationCheck", "true")).lower() != "true":
        return
    plan = df._jdf.queryExecution().analyzed()
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    modes = jvm.org.apache.spark.sql.streaming.OutputMode
    try:
        checker.checkForStreaming(plan, modes.Append())
    except Exception as exc:
        if not append_refused(exc):
            raise
        checker.checkForStreaming(plan, modes.Update())


def start_query(writer):
    """``writer.start()`` in append mode, else (refused for the query) in update mode."""
    try:
        return writer.outputMode("append").start()
    except Exception as exc:
        if not append_refused(exc):
            raise
        # A stateful SQL transform (aggregation without watermark): emit updated rows.
        return writer.outputMode("update").start()


__all__ = ["append_refused", "check_stream", "start_query"]
