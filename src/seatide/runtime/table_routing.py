"""A multi-table pipeline's micro-batch, table by table (docs/design/multi-table.md).

The source reads all its tables in one query; its rows carry their table's index
(``plugin.tables``). For each micro-batch (or the plain batch) the rows are taken apart here:
each sink gets every table's rows, through the transforms between the source and the sink
applied to that table alone, as a ``TableFrames`` for its one writer, which decides the batch
once for every table. Only tables with rows in the batch are written; a table is read out of
the batch with a filter on its tag, so a batch that cannot be filtered without reading the
source again (CDC's interleaved rows) is persisted first and counted per table in one job. A
source that reads its tables apart (the Jdbc source) gives them apart (``TableRows.per_table``).

A small micro-batch of such a source (CDC's changes: a few hundred rows over many tables) is
instead collected on the driver in that one job and taken apart here, in Python; a sink with no
transform before it gets each table's rows as they are (``TableFrames.local``) and writes them
without a Spark job of its own (the Jdbc sink: into temporary tables of its commit's
transaction). Taking 100 tables apart with Spark cost ≈5 s a batch in plan analysis alone (a
filter and a select over the 100-struct frame per table), and a Spark write per table ≈0.3 s
each, whatever the rows: a batch of 1,000 changes over 100 tables took ≈40 s, where its one
collect takes ≈0.4 s. Frames are still built, lazily, for a sink that asks for them (a large
batch, transforms before the sink, a type only Spark stages). Measured in docs/benchmarks.md
("CDC end to end over many tables").

"Small" is bounded by bytes as well as rows: rows of megabytes would fill the driver or fail the
collect on every replay. The source says what its batch's bytes are when its stream knows them
(``TableRows.bytes``, ``least_bytes``); otherwise one grouped Spark job measures the persisted
batch first (each row's values as JSON). The persisted batch is cached in buffers of about
``CACHE_BUFFER_BYTES`` when the source says its rows are large (``row_bytes``): Spark's default
of 10,000 rows a buffer would put gigabytes of such rows in one. It is persisted whatever its
size: each table read out of the source again would stream a CDC source's slot once per table,
at the same time (a slot serves one stream at a time).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import contextmanager

from seatide.plan.dag import Pipeline
from seatide.plugin.base import BatchOffsets, ReadContext, TransformContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN
from seatide.plugin.tables import TABLE_COLUMN, TableFrames, TableLayout, TableRoute, TableRows, struct_column
from seatide.runtime import change_order

# A micro-batch of at most this many rows, and about this many bytes, is collected on the driver
# and taken apart there; under both, every sink without transforms writes with no Spark job (see
# the module's docstring and docs/benchmarks.md). A batch over either is counted by Spark and each
# table written from Spark's frames: the driver (1 GiB of heap by default, as is
# spark.driver.maxResultSize) never collects more than the bound, however large the rows.
LOCAL_BATCH_ROWS = 10_000
LOCAL_BATCH_BYTES = 64 << 20
# What one buffer of a persisted batch's cache holds at most, when its source says its rows are
# large (Spark's default is 10,000 rows a buffer, whatever their size).
CACHE_BUFFER_BYTES = 16 << 20
_CACHE_ROWS_CONF, _CACHE_ROWS = "spark.sql.inMemoryColumnarStorage.batchSize", 10_000

log = logging.getLogger(__name__)


def collect_small(frame, at_most: int) -> list | None:
    """Up to ``at_most + 1`` of ``frame``'s rows on the driver (one more tells a batch over the
    bound); None when a value has no Python form: a timestamp before year 1 once in UTC, or past
    9999 in the driver's zone, is out of ``datetime``'s range (a clamped PostgreSQL -infinity is
    0001-01-01 UTC). Such a batch is left to Spark, whose writer takes every value it holds."""
    try:
        return frame.limit(at_most + 1).collect()
    except (ValueError, OverflowError) as exc:
        log.info("batch left to Spark: a value has no Python form on the driver (%s)", exc)
        return None


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
        started = time.perf_counter()
        rows = self.source.plugin.batch_rows(batch_df, self.ctx, offsets)
        if rows.per_table is not None:
            log.info("batch's reads of %d table(s) planned in %.2f s", len(rows.per_table),
                     time.perf_counter() - started)
        if rows.separable:
            self._count(rows)
            return rows
        with self._cache_batches(rows.row_bytes):
            rows.frame = rows.frame.persist()
            if self.ctx.micro_batch and rows.tables is None:
                self._collect(rows)
            self._count(rows)           # fills the cache, under the batch size chosen for its rows
        return rows

    @staticmethod
    def _count(rows: TableRows) -> None:
        if rows.tables is None:
            counted = rows.frame.groupBy(TABLE_COLUMN).count().collect()
            rows.counts = {int(r[0]): int(r[1]) for r in counted}
            rows.tables = tuple(sorted(rows.counts))

    @contextmanager
    def _cache_batches(self, row_bytes: int | None):
        """Spark caches a persisted batch in buffers of 10,000 rows: of rows of megabytes, gigabytes
        in one buffer. When the source says how large its rows are, a buffer holds about
        ``CACHE_BUFFER_BYTES`` of them while the batch's cache is filled."""
        if not row_bytes or row_bytes * _CACHE_ROWS <= CACHE_BUFFER_BYTES:
            yield
            return
        conf = self.spark.conf
        before = conf.get(_CACHE_ROWS_CONF, None)
        conf.set(_CACHE_ROWS_CONF, str(max(1, CACHE_BUFFER_BYTES // row_bytes)))
        try:
            yield
        finally:
            conf.set(_CACHE_ROWS_CONF, before) if before is not None else conf.unset(_CACHE_ROWS_CONF)

    def _collect(self, rows: TableRows) -> None:
        """Collect a small batch (one Spark job) and take it apart by table; a large one, by rows
        or by bytes, is left to Spark. A batch whose bytes its source does not know is measured
        first (its rows and bytes per table: one more Spark job, which counts a large one too)."""
        started = time.perf_counter()
        size = rows.bytes
        if rows.least_bytes > LOCAL_BATCH_BYTES:
            log.info("batch of at least %d bytes left to Spark: over the %d bytes collected on the driver",
                     rows.least_bytes, LOCAL_BATCH_BYTES)
            return
        if size is None:
            measured = self._measure(rows.frame)
            if measured is None:
                return
            size = sum(b for _, b in measured.values())
            if size > LOCAL_BATCH_BYTES or sum(n for n, _ in measured.values()) > LOCAL_BATCH_ROWS:
                rows.counts = {index: n for index, (n, _) in measured.items()}
                rows.tables = tuple(sorted(rows.counts))
                log.info("batch of %d rows and %d bytes left to Spark: over the %d rows or %d bytes collected "
                         "on the driver", sum(rows.counts.values()), size, LOCAL_BATCH_ROWS, LOCAL_BATCH_BYTES)
                return
        elif size > LOCAL_BATCH_BYTES:
            log.info("batch of about %d bytes left to Spark: over the %d bytes collected on the driver", size,
                     LOCAL_BATCH_BYTES)
            return
        collected = collect_small(rows.frame, LOCAL_BATCH_ROWS)
        if collected is None or len(collected) > LOCAL_BATCH_ROWS:
            return
        rows.local = {}
        for row in collected:
            rows.local.setdefault(int(row[TABLE_COLUMN]), []).append(row)
        log.info("batch of %d rows (%d bytes) over %d table(s) collected in %.2f s", len(collected), size,
                 len(rows.local), time.perf_counter() - started)
        rows.counts = {index: len(table_rows) for index, table_rows in rows.local.items()}
        rows.tables = tuple(sorted(rows.counts))

    def _measure(self, frame) -> dict[int, tuple[int, int]] | None:
        """Each table's (rows, bytes) in a persisted batch: a row's bytes are its values as JSON,
        which every type has (a binary value counts as its base64). None when a type has none."""
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        values = F.struct(*[struct_column(i) for i in range(len(self.layout.names))])
        try:
            measured = frame.groupBy(TABLE_COLUMN).agg(F.count(F.lit(1)), F.sum(F.octet_length(F.to_json(values))))
        except AnalysisException as exc:
            log.info("batch left to Spark: its rows cannot be measured (%s)", str(exc).splitlines()[0])
            return None
        return {int(r[0]): (int(r[1]), int(r[2] or 0)) for r in measured.collect()}

    def release(self, rows: TableRows) -> None:
        if not rows.separable:
            rows.frame.unpersist()          # nothing to do for a batch left unpersisted

    def frames(self, rows: TableRows, sink) -> TableFrames:
        """Each table's rows for ``sink``, through the transforms before it."""
        present = set(rows.tables or ())
        routes = sink.plugin.routes or [TableRoute(0, self.layout.names[0], sink.plugin.catalog, sink.plugin)]
        frames = _Frames([route.index for route in routes if route.index in present],
                         lambda index: self._through(rows, index, sink))

        def schema_of(index: int):
            if (sink.plugin_id, index) not in self._schemas:      # analysed once, not per batch
                self._schemas[(sink.plugin_id, index)] = self._through(rows, index, sink).schema
            return self._schemas[(sink.plugin_id, index)]

        local = None
        if rows.local is not None and not self.pipeline.chain(sink.plugin_id):
            started = time.perf_counter()
            local = {index: self._table_values(rows.local[index], index, schema_of(index)) for index in frames}
            log.info("sink %s: %d table(s) taken apart in %.2f s", sink.plugin_id, len(local),
                     time.perf_counter() - started)
        return TableFrames(frames, {i: n for i, n in rows.counts.items() if i in frames}, schema_of, local)

    def fields_of(self, sink) -> TableFrames:
        """``sink``'s tables with no rows, whose ``schema_of`` gives each table's fields through the
        transforms before the sink: what the job's checks ahead see before the first batch (not kept
        for the batches, whose rows may carry ``__row_seq`` too)."""
        empty = TableRows(None, per_table={})
        return TableFrames({}, {}, lambda index: self._through(empty, index, sink).schema)

    def _table_values(self, tagged: list, index: int, schema) -> list[tuple]:
        """Table ``index``'s collected rows as its frame would give them (``schema``: its fields,
        ``__row_kind``, and ``__row_seq`` when the sink takes it): tuples in the batch's order.
        A row's place among them stands for a ``__row_seq`` the source did not write, as
        ``change_order.number_changes`` numbers the frame in the same order."""
        struct = struct_column(index)
        own = self.layout.structs[index].fieldNames()
        sequenced = bool(tagged) and ROW_SEQ_COLUMN in tagged[0].__fields__
        picks = []
        for name in schema.fieldNames():
            if name == ROW_KIND_COLUMN:
                picks.append(lambda row, _place: row[ROW_KIND_COLUMN])
            elif name == ROW_SEQ_COLUMN:
                picks.append((lambda row, _place: row[ROW_SEQ_COLUMN]) if sequenced else (lambda _row, place: place))
            else:
                at = own.index(name)
                picks.append(lambda row, _place, at=at: row[struct][at])
        return [tuple(pick(row, place) for pick in picks) for place, row in enumerate(tagged)]

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


class _Frames(Mapping):
    """Each present table's frame, built when a sink first asks for it: a sink that writes the
    collected rows (``TableFrames.local``) never pays the analysis."""

    def __init__(self, indexes: list[int], build):
        self._indexes = list(indexes)
        self._build = build
        self._built: dict = {}

    def __getitem__(self, index: int):
        if index not in self._indexes:
            raise KeyError(index)
        if index not in self._built:
            self._built[index] = self._build(index)
        return self._built[index]

    def __contains__(self, index) -> bool:     # Mapping's own would build the frame
        return index in self._indexes

    def __iter__(self):
        return iter(self._indexes)

    def __len__(self) -> int:
        return len(self._indexes)


__all__ = ["RoutedPipeline"]
