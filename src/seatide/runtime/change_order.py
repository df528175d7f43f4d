"""Each change's place in its source's order, carried to the sinks that apply changes by key.

A sink that keeps the last change per key of a batch (Jdbc or Iceberg with keys) must know
which change came last in the source. The order rows reach it in is not that: a transform
that moves rows between partitions (ORDER BY, a REPARTITION hint) reorders one key's INSERT
and DELETE. So the source's order is written down where it still holds, on the source's own
frame: a change source emits each batch's changes in commit order, in ordered partitions
(the CDC sources: one partition per batch of the stream), and ``monotonically_increasing_id``
numbered there, before any exchange, follows that order. Transforms carry the number
(``__row_seq``) as they carry the row kind; a sink that keeps the last change per key gets it,
every other sink never sees it. Sources of inserts only get no number: nothing to order, and
an append pays nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import PermanentError
from seatide.plugin.rowkind import INSERT_ONLY, ROW_SEQ_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from seatide.plan.dag import Pipeline


def emits_changes(source) -> bool:
    """Whether a source plugin's rows may be other than inserts."""
    return bool(source.row_kinds() - INSERT_ONLY)


def number_changes(df: "DataFrame", source) -> "DataFrame":
    """The source's frame with each row's place in the source's order, when it emits changes.

    Not yet on a stream: Spark refuses ``monotonically_increasing_id`` there, so a single-table
    streaming pipeline still orders by arrival (the sources must number their rows themselves;
    issue 22). Plain batches and routed micro-batches (numbered per batch) are covered."""
    if not emits_changes(source) or df.isStreaming:
        return df
    from pyspark.sql import functions as F

    return df.withColumn(ROW_SEQ_COLUMN, F.monotonically_increasing_id())


def for_sink(df: "DataFrame", sink) -> "DataFrame":
    """What ``sink`` gets: the changes' order only when it applies changes by key."""
    if ROW_SEQ_COLUMN in df.columns and not sink.keeps_last_change_per_key:
        return df.drop(ROW_SEQ_COLUMN)
    return df


def check_order_reaches(df: "DataFrame", pipeline: "Pipeline", sink_spec) -> None:
    """Refuse, before any row moves, a sink that would apply changes in the order rows reach it.

    Every transform that maps rows to rows carries ``__row_seq``; one that merges rows (GROUP BY,
    a join) emits inserts without it, whose order per key no source defined. A change other than
    an insert that reaches a keyed sink without its number is a transform that lost it.
    """
    if not sink_spec.plugin.keeps_last_change_per_key or ROW_SEQ_COLUMN in df.columns or df.isStreaming:
        return
    numbered = [s for s in pipeline.sources if emits_changes(s.plugin)]
    if not numbered or not (_kinds_into(pipeline, sink_spec.plugin_id) - INSERT_ONLY):
        return
    raise PermanentError(
        f"{sink_spec.label} applies changes by key, but a transform before it dropped the hidden "
        f"'{ROW_SEQ_COLUMN}' column, each change's place in the source's order: without it the "
        "last change per key would be whichever reached the sink last. Keep the column in the "
        "transform's output (as the row kind is kept)")


def _kinds_into(pipeline: "Pipeline", plugin_id: str) -> frozenset:
    """The row kinds that may reach ``plugin_id`` (as plan.dag works them out)."""
    by_id = {s.plugin_id: s for s in pipeline.plugins}
    spec = by_id[plugin_id]
    if spec.kind == "source":
        return spec.plugin.row_kinds()
    upstream = frozenset().union(*(_kinds_into(pipeline, i) for i in pipeline.inputs[plugin_id]))
    return spec.plugin.row_kinds(upstream) if spec.kind == "transform" else upstream


__all__ = ["check_order_reaches", "emits_changes", "for_sink", "number_changes"]
