"""A multi-table pipeline's micro-batch, table by table (docs/design/multi-table.md).

The source reads all its tables in one query; its rows carry their table's index
(``plugin.tables``). For each micro-batch (or the plain batch) the rows are taken apart here:
each sink gets every table's rows, through the transforms between the source and the sink
applied to that table alone, as a ``TableFrames`` for its one writer, which decides the batch
once for every table. Only tables with rows in the batch are written; a table is read out of
the batch with a filter on its tag, so a batch that cannot be filtered without reading the
source again (CDC's interleaved rows) is persisted first and counted per table in one job. A
source that reads its tables apart (the Jdbc source) gives them apart (``TableRows.per_table``).
"""

from __future__ import annotations

from seatide.plan.dag import Pipeline
from seatide.plugin.base import Batch, BatchOffsets, ReadContext, SinkWriter, StagedBatch, TransformContext
from seatide.plugin.tables import TABLE_COLUMN, TableFrames, TableLayout, TableRoute, TableRows
from seatide.runtime import change_order


class RoutedPipeline:
    def __init__(self, spark, pipeline: Pipeline, read_ctx: ReadContext):
        self.spark = spark
        self.pipeline = pipeline
        self.source = pipeline.sources[0]           # plan.dag refuses a second source
        self.ctx = read_ctx
        self.layout: TableLayout | None = None
        self._schemas: dict[tuple[str, int], object] = {}     # (sink, table) -> its rows' fields

    def read(self):
        """The source's one query (a stream when checkpointed, else the plain batch's rows)."""
        df = self.source.plugin.read(self.ctx)
        self.layout = self.source.plugin.table_layout(self.ctx)
        return df

    def rows(self, batch_df, offsets: BatchOffsets | None = None) -> TableRows:
        """The batch's rows, ready to be read table by table (persisted and counted when needed);
        ``offsets``: the batch's range of the source's stream (None in the plain batch)."""
        rows = self.source.plugin.batch_rows(batch_df, self.ctx, offsets)
        if not rows.separable:
            rows.frame = rows.frame.persist()
        if rows.tables is None:
            counted = rows.frame.groupBy(TABLE_COLUMN).count().collect()
            rows.counts = {int(r[0]): int(r[1]) for r in counted}
            rows.tables = tuple(sorted(rows.counts))
        return rows

    def release(self, rows: TableRows) -> None:
        if not rows.separable:
            rows.frame.unpersist()

    def frames(self, rows: TableRows, sink) -> TableFrames:
        """Each table's rows for ``sink``, through the transforms before it."""
        present = set(rows.tables or ())
        routes = sink.plugin.routes or [TableRoute(0, self.layout.names[0], sink.plugin.catalog, sink.plugin)]
        frames = {route.index: self._through(rows, route.index, sink)
                  for route in routes if route.index in present}

        def schema_of(index: int):
            if (sink.plugin_id, index) not in self._schemas:      # analysed once, not per batch
                self._schemas[(sink.plugin_id, index)] = self._through(rows, index, sink).schema
            return self._schemas[(sink.plugin_id, index)]

        return TableFrames(frames, {i: n for i, n in rows.counts.items() if i in frames}, schema_of)

    def _through(self, rows: TableRows, index: int, sink):
        """Table ``index``'s rows of the batch after the transforms between the source and ``sink``."""
        # numbered where the table's rows are still in the batch's order, before any transform
        df = change_order.number_changes(self.layout.rows_of(rows, index, self.spark), self.source.plugin)
        upstream = self.source.output or self.source.name
        for spec in self.pipeline.chain(sink.plugin_id):
            ctx = TransformContext(spark=self.spark, input_name=upstream,
                                   output_name=spec.output or spec.name, micro_batch=False)
            df = spec.plugin.apply(df, ctx)
            upstream = spec.output or spec.name
        change_order.check_order_reaches(df, self.pipeline, sink)
        return change_order.for_sink(df, sink.plugin)


class OneTable(SinkWriter):
    """The writer of a single-table sink in a routed pipeline (a source that expands its batches):
    it gets its table's frame, or, when the batch has no rows, an empty one."""

    def __init__(self, writer: SinkWriter):
        self.writer = writer
        self.publishes_files = writer.publishes_files

    def _frame(self, frames: TableFrames):
        if 0 in frames.frames:
            return frames.frames[0]
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession().createDataFrame([], frames.schema_of(0))

    def write_batch(self, frames: TableFrames, batch: Batch) -> dict:
        return self.writer.write_batch(self._frame(frames), batch)

    def stage_batch(self, frames: TableFrames, batch: Batch) -> StagedBatch:
        return self.writer.stage_batch(self._frame(frames), batch)

    def publish(self, publish: dict) -> None:
        self.writer.publish(publish)

    def abort_batch(self, batch_id: int, intent: dict) -> None:
        self.writer.abort_batch(batch_id, intent)

    def end_of_data(self, state: dict) -> None:
        self.writer.end_of_data(state)

    def evolve(self, changes: list, behaviour: str) -> None:
        self.writer.evolve(changes, behaviour)


__all__ = ["OneTable", "RoutedPipeline"]
