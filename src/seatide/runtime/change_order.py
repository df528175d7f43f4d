"""Each change's place in its source's order, carried to the sinks that apply changes by key.

A sink that keeps the last change per key of a batch (Jdbc or Iceberg with keys) must know
which change came last in the source. The order rows reach it in is not that: a transform
that moves rows between partitions (ORDER BY, a REPARTITION hint) reorders one key's INSERT
and DELETE. So the source's order is written down where it still holds, on the source's own
rows (``__row_seq``). A source that streams changes writes it itself (the CDC sources number
each batch's rows as they read them in commit order; FakeSource gives its row number): Spark
refuses ``monotonically_increasing_id`` on a stream. Any other source of changes has its frame
numbered here with it, before any exchange, which follows the order of ordered partitions.
Transforms carry the number as they carry the row kind; a sink that keeps the last change per
key gets it, every other sink never sees it. Sources of inserts only get no number: nothing to
order, and an append pays nothing.
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
    """The source's frame with each row's place in the source's order, when it emits changes and
    did not write it itself. A stream is left as it is: Spark cannot number it, and
    ``check_order_reaches`` refuses it before a keyed sink."""
    if not emits_changes(source) or ROW_SEQ_COLUMN in df.columns or df.isStreaming:
        return df
    from pyspark.sql import functions as F

    return df.withColumn(ROW_SEQ_COLUMN, F.monotonically_increasing_id())


def for_sink(df: "DataFrame", sink) -> "DataFrame":
    """What ``sink`` gets: the changes' order only when it applies changes by key."""
    if ROW_SEQ_COLUMN in df.columns and not sink.keeps_last_change_per_key:
        return df.drop(ROW_SEQ_COLUMN)
    return df


def check_order_reaches(df: "DataFrame", pipeline: "Pipeline", sink_spec, sources: "dict | None" = None) -> None:
    """Refuse, before any row moves, a sink that would apply changes in the order rows reach it.

    Every transform that maps rows to rows carries ``__row_seq``; one that merges rows (GROUP BY,
    a join) emits inserts without it, whose order per key no source defined. A change other than
    an insert that reaches a keyed sink without its number is a transform that lost it, or a
    stream from a source that does not number its rows (``sources``: each source's frame by
    plugin id, as ``number_changes`` left it).
    """
    if not sink_spec.plugin.keeps_last_change_per_key or ROW_SEQ_COLUMN in df.columns:
        return
    numbered = [s for s in pipeline.sources if emits_changes(s.plugin)]
    if not numbered or not (_kinds_into(pipeline, sink_spec.plugin_id) - INSERT_ONLY):
        return
    if df.isStreaming:
        unnumbered = [s.label for s in numbered
                      if sources is not None and ROW_SEQ_COLUMN not in sources[s.plugin_id].columns]
        if unnumbered:
            raise PermanentError(
                f"{sink_spec.label} applies changes by key, but {', '.join(unnumbered)} streams changes "
                f"without the hidden '{ROW_SEQ_COLUMN}' column, each change's place in the source's order, "
                "and Spark cannot number a stream's rows: a transform that moves rows between partitions "
                "would make the last change per key whichever reached the sink last. The source plugin "
                f"must write '{ROW_SEQ_COLUMN}' into its rows (as Postgres-CDC and MySQL-CDC do, "
                "plugin/rowkind.py); until it does, run the pipeline with job.mode = BATCH, or write to "
                "a sink without primary keys")
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
