"""The checkpointed read of a FakeSource of several tables: ONE stream of split descriptors.

Every table keeps its own ``SplitLayout`` (its ``row.num``, ``split.num``, parallelism and unit
size) and its own units, in the order a single-table stream admits them. The stream's offset is
one position per table::

    {"units": [n0, n1, ...], "layouts": [fingerprint0, fingerprint1, ...]}

``n_i`` units of table ``i`` admitted so far. A micro-batch admits units of several tables, the
least advanced table first, as many as its row bound holds; in a STREAMING job each table is
paced by its own ``split.read-interval``. A batch's descriptors, ``(table, start, stop)`` row-number ranges, are a
pure function of its two offsets (``batch_units``): the driver derives them from the offsets
Spark logged for the batch (runtime/offset_log.py) and has the JVM make each table's rows from
them (``FakeSource.batch_rows``), so the stream's own rows are never read and a replayed batch
yields the same rows.

Why one stream: a Python streaming source costs a Python process on the driver and Spark's
bookkeeping per source; a source per table made 100 tables 211 Python processes (see
docs/design/multi-table.md). One stream costs the same whatever the table count.
"""

from __future__ import annotations

import heapq
import json
import time
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from seatide.connectors.fake.layout import SplitLayout
from seatide.plugin.base import permanent_in_worker

SOURCE_NAME = "seatide_fake_table_splits"
DESCRIPTORS = "table int, start bigint, stop bigint"


def stream_spec(layouts: list[SplitLayout], intervals_ms: list[int], *, max_rows: int, unbounded: bool) -> str:
    """The one option of ``spark.readStream.format(SOURCE_NAME)``."""
    return json.dumps({"layouts": [[lay.readers, lay.rows_per_reader, lay.splits_per_reader, lay.unit_rows]
                                   for lay in layouts],
                       "intervals_ms": intervals_ms, "max_rows": max_rows, "unbounded": unbounded})


def _layouts(spec: dict) -> list[SplitLayout]:
    return [SplitLayout(*map(int, values)) for values in spec["layouts"]]


def admitted_through(layouts: list[SplitLayout], begin: list[int], targets: list[int],
                     max_rows: int | None) -> list[int]:
    """Each table's position after the next batch from ``begin``: whole units, the least advanced
    table first (ties: the lower index), at most ``max_rows`` rows (but at least one unit), no
    table past its target. Tables move on together, as SeaTunnel's readers read every table's
    splits at once and as the stream of one source per table did: a batch holds every table
    that has units left, and a crash between two tables' commits has two tables to split."""
    targets = [min(t, lay.unit_count) for t, lay in zip(targets, layouts)]
    if max_rows is None:
        return [max(b, t) for b, t in zip(begin, targets)]
    end = list(begin)
    waiting = [(n, i) for i, n in enumerate(begin) if n < targets[i]]
    heapq.heapify(waiting)
    rows = 0
    while waiting:
        n, i = heapq.heappop(waiting)
        unit = next(layouts[i].units(n, n + 1))
        if rows and rows + unit.stop - unit.start > max_rows:
            break
        rows += unit.stop - unit.start
        end[i] = n + 1
        if end[i] < targets[i]:
            heapq.heappush(waiting, (end[i], i))
    return end


def batch_units(layouts: list[SplitLayout], start: dict | None, end: dict) -> dict[int, list[tuple[int, int]]]:
    """The row-number ranges ``(start, stop)`` of each table with units in the batch from
    ``start`` to ``end`` (``start`` None: the stream's initial offset). A pure function of the two
    offsets: a replayed batch gets the same ranges."""
    last = units_of(layouts, end)
    first = units_of(layouts, start) if start is not None else [0] * len(layouts)
    ranges = {}
    for i, layout in enumerate(layouts):
        if last[i] > first[i]:
            ranges[i] = [(u.start, u.stop) for u in layout.units(first[i], last[i])]
    return ranges


def units_of(layouts: list[SplitLayout], offset: dict) -> list[int]:
    """Each table's admitted units in ``offset``; refuses an offset written for other layouts."""
    written, now = offset.get("layouts"), [lay.fingerprint for lay in layouts]
    if written != now:
        if not isinstance(written, list) or len(written) != len(now):
            changed = f"{len(written) if isinstance(written, list) else 'other'} tables"
        else:
            changed = next(f"table {i} with split layout {w}" for i, (w, n) in enumerate(zip(written, now)) if w != n)
        raise permanent_in_worker(     # no retry makes the layouts meet: a clear message, no traceback
            f"FakeSource: the checkpoint was written for {changed} (readers x row.num / split.num / rows per "
            f"unit), but the job now has {len(now)} tables of layouts {', '.join(now)}; resume with the same "
            "tables, parallelism, row.num, split.num and env micro-batch.max-rows, or start over from a new "
            "checkpoint with --fallback fresh")
    return [int(n) for n in offset["units"]]


class Descriptors(InputPartition):
    def __init__(self, ranges: list[tuple[int, int, int]]):
        super().__init__(len(ranges))
        self.ranges = ranges


class FakeTableSplits(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return DESCRIPTORS

    def streamReader(self, schema) -> "FakeTableSplitsReader":
        return FakeTableSplitsReader(json.loads(self.options["spec"]))


class FakeTableSplitsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: dict):
        self.layouts = _layouts(spec)
        self.intervals_ms = [int(ms) for ms in spec["intervals_ms"]]
        self.max_rows = int(spec["max_rows"])
        self.unbounded = bool(spec["unbounded"])
        self.targets = [lay.unit_count for lay in self.layouts]
        self._clock_start: float | None = None     # when this reader first admitted data
        self._clock_splits: list[int] = []         # each table's split level at that moment

    def _offset(self, units: list[int]) -> dict:
        return {"units": units, "layouts": [lay.fingerprint for lay in self.layouts]}

    def initialOffset(self) -> dict:
        return self._offset([0] * len(self.layouts))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        self.targets = [lay.unit_count for lay in self.layouts]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = units_of(self.layouts, start)
        targets = self._admitted_by_clock(begin) if self.unbounded else self.targets
        max_rows = None if isinstance(limit, ReadAllAvailable) else (
            limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_rows)
        return self._offset(admitted_through(self.layouts, begin, targets, max_rows))

    def _admitted_by_clock(self, begin: list[int]) -> list[int]:
        """Each table's units whose split its readers would have reached by now, one split per the
        table's ``split.read-interval`` (as the single-table stream paces one table). The clock
        starts at the first call, from wherever the stream resumed; replays never consult it."""
        if self._clock_start is None:
            self._clock_start = time.monotonic()
            self._clock_splits = [lay.split_of(n) for lay, n in zip(self.layouts, begin)]
        elapsed_ms = (time.monotonic() - self._clock_start) * 1000.0
        return [lay.unit_count if ms <= 0 else lay.units_through_split(split + int(elapsed_ms // ms))
                for lay, ms, split in zip(self.layouts, self.intervals_ms, self._clock_splits)]

    def reportLatestOffset(self) -> dict:
        return self._offset(list(self.targets))

    def partitions(self, start: dict, end: dict) -> list[Descriptors]:
        ranges = [(table, low, high) for table, units in batch_units(self.layouts, start, end).items()
                  for low, high in units]
        return [Descriptors(ranges)] if ranges else []

    def read(self, partition: Descriptors) -> Iterator[tuple]:
        # Not read by SeaTide's runtime (it derives the same ranges from Spark's offset log);
        # here so that the stream means what it says to anyone who reads it.
        yield from partition.ranges

    def commit(self, end: dict) -> None:
        """Nothing to release: units are computed, not buffered."""


__all__ = ["DESCRIPTORS", "FakeTableSplits", "FakeTableSplitsReader", "SOURCE_NAME", "admitted_through",
           "batch_units", "stream_spec", "units_of"]
