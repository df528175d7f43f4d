"""A Python streaming data source that emits FakeSource's split descriptors, not rows.

Each micro-batch gets a range of units (see ``layout``); each unit becomes one row
``(split_id, reader, start, stop)`` and Spark expands it into rows with
``explode(sequence(start, stop - 1))``. Python decides offsets; the JVM makes the rows.

Offsets are ``{"splits": n, "layout": fingerprint}``: ``n`` units admitted so far. Spark
replays a batch from its logged offsets, and a unit range always maps to the same rows,
so a replayed batch is identical. The class lives in an importable module because Spark's
Python workers unpickle it.
"""

from __future__ import annotations

import time
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from seatide.connectors.fake.layout import SplitLayout
from seatide.plugin.base import permanent_in_worker

SOURCE_NAME = "seatide_fake_splits"
SCHEMA = "split_id bigint, reader int, start bigint, stop bigint"
_ARROW_BATCH_ROWS = 65_536


def stream_options(layout: SplitLayout, *, max_rows: int, unbounded: bool, interval_ms: int,
                   partitions: int) -> dict[str, str]:
    """Options for ``spark.readStream.format(SOURCE_NAME)``; Spark passes options as strings."""
    return {
        "readers": str(layout.readers),
        "rows_per_reader": str(layout.rows_per_reader),
        "splits_per_reader": str(layout.splits_per_reader),
        "unit_rows": str(layout.unit_rows),
        "max_rows": str(max_rows),
        "unbounded": "true" if unbounded else "false",
        "interval_ms": str(interval_ms),
        "partitions": str(partitions),
    }


class UnitRange(InputPartition):
    """Units ``begin..end-1`` of ``layout``: one Spark task's share of a micro-batch."""

    def __init__(self, layout: SplitLayout, begin: int, end: int):
        super().__init__((begin, end))
        self.layout, self.begin, self.end = layout, begin, end


class FakeSplitSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "FakeSplitReader":
        return FakeSplitReader(self.options)


class FakeSplitReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.layout = SplitLayout(int(options["readers"]), int(options["rows_per_reader"]),
                                  int(options["splits_per_reader"]), int(options["unit_rows"]))
        self.max_rows = int(options["max_rows"])
        self.unbounded = options.get("unbounded", "false") == "true"
        self.interval_ms = int(options.get("interval_ms", "0"))
        self.partition_count = max(1, int(options.get("partitions", "1")))
        self.target = self.layout.unit_count
        self._clock_start: float | None = None   # when this reader first admitted data
        self._clock_split = 0                    # the split level admitted at that moment

    # -- offsets -------------------------------------------------------------------------
    def _offset(self, units: int) -> dict:
        return {"splits": units, "layout": self.layout.fingerprint}

    def _units(self, offset: dict) -> int:
        if offset.get("layout") != self.layout.fingerprint:
            # permanent: no retry makes the layouts meet, and the user is told so, not shown Spark's traceback
            raise permanent_in_worker(
                f"FakeSource: the checkpoint was written with split layout {offset.get('layout')} "
                f"(readers x row.num / split.num / rows per unit) but the job now has "
                f"{self.layout.fingerprint}; resume with the same parallelism, row.num, split.num "
                "and env micro-batch.max-rows, or start over from a new checkpoint with --fallback fresh")
        return int(offset["splits"])

    def initialOffset(self) -> dict:
        return self._offset(0)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self.layout.unit_count

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._units(start)
        target = self.target
        if self.unbounded:
            target = min(target, self._admitted_by_clock(begin))
        max_rows = None if isinstance(limit, ReadAllAvailable) else self.max_rows
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        return self._offset(self.layout.admit(begin, target, max_rows))

    def _admitted_by_clock(self, begin: int) -> int:
        """Units whose split a reader would have reached by now, one split per interval.

        The clock starts at the first call, from wherever the stream resumed; replays never
        consult it (Spark replays a batch from its logged offsets).
        """
        if self._clock_start is None:
            self._clock_start = time.monotonic()
            self._clock_split = self.layout.split_of(begin)
        if self.interval_ms <= 0:
            return self.layout.unit_count
        elapsed_ms = (time.monotonic() - self._clock_start) * 1000.0
        return self.layout.units_through_split(self._clock_split + int(elapsed_ms // self.interval_ms))

    def reportLatestOffset(self) -> dict:
        return self._offset(self.target)

    def partitions(self, start: dict, end: dict) -> list[UnitRange]:
        begin, stop = self._units(start), self._units(end)
        count = stop - begin
        if count <= 0:
            return []
        parts = min(count, self.partition_count)
        bounds = [begin + i * count // parts for i in range(parts + 1)]
        return [UnitRange(self.layout, bounds[i], bounds[i + 1]) for i in range(parts)]

    def read(self, partition: UnitRange) -> Iterator:
        import pyarrow as pa

        from seatide import failpoints

        # Inside the Spark task, in the executor's Python worker: a task that deadlocks
        # while its driver lives and heartbeats (tests of the progress watchdog).
        failpoints.hit("source.fake.read_partition")
        columns: tuple[list, list, list, list] = ([], [], [], [])
        for unit in partition.layout.units(partition.begin, partition.end):
            for column, value in zip(columns, (unit.index, unit.reader, unit.start, unit.stop)):
                column.append(value)
            if len(columns[0]) >= _ARROW_BATCH_ROWS:
                yield _record_batch(pa, columns)
                columns = ([], [], [], [])
        if columns[0]:
            yield _record_batch(pa, columns)

    def commit(self, end: dict) -> None:
        """Nothing to release: units are computed, not buffered."""


def _record_batch(pa, columns):
    ids, readers, starts, stops = columns
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.int64()), pa.array(readers, pa.int32()),
         pa.array(starts, pa.int64()), pa.array(stops, pa.int64())],
        names=["split_id", "reader", "start", "stop"])
