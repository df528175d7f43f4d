"""Rows -> Arrow record batches whose types match the Spark schema exactly.

Every row carries its place in the order it was added (``__row_seq``, plugin.rowkind): a binlog
batch is one partition reading its transactions in commit order, so the number orders one
key's changes however a transform moves them (Spark cannot number a stream's rows). The builders
of one binlog read share one numbering (``numbering``): a key moved between shards in one
transaction (deleted from orders_1, inserted into orders_0) is one key to a sink that merges the
shards, which orders its changes by this number across tables (issue 30, finding 3). A snapshot
split's builder numbers from ``first_seq`` on: a batch's splits start apart (``PARTITION_SEQ_STRIDE``)."""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator, Sequence

import pyarrow as pa

from seatide.connectors.mysql_cdc.columns import Column
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind

ARROW_BATCH_ROWS = 8192


class BatchBuilder:
    """Collects converted rows column by column and cuts a RecordBatch every ``ARROW_BATCH_ROWS``."""

    def __init__(self, columns: Sequence[Column], first_seq: int = 0, numbering: Iterator[int] | None = None):
        self.columns = columns
        self.names = [c.name for c in columns] + [ROW_KIND_COLUMN, ROW_SEQ_COLUMN]
        self.types = [c.arrow_type for c in columns] + [pa.int8(), pa.int64()]
        self.numbering = numbering if numbering is not None else itertools.count(first_seq)
        self._reset()

    def _reset(self) -> None:
        self._values: list[list] = [[] for _ in self.names]

    def add(self, raw: Sequence, kind: RowKind) -> pa.RecordBatch | None:
        """Add one row as the client gave it; returns a full batch when one is ready."""
        for target, col, value in zip(self._values, self.columns, raw):
            target.append(col.convert(value))
        self._values[-2].append(int(kind))
        self._values[-1].append(next(self.numbering))
        return self.flush() if len(self._values[-1]) >= ARROW_BATCH_ROWS else None

    def flush(self) -> pa.RecordBatch | None:
        if not self._values[-1]:
            return None
        arrays = [pa.array(values, type=t) for values, t in zip(self._values, self.types)]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=self.names)


def record_batches(builder: BatchBuilder, rows: Iterable[tuple[Sequence, RowKind]]) -> Iterator[pa.RecordBatch]:
    for raw, kind in rows:
        batch = builder.add(raw, kind)
        if batch is not None:
            yield batch
    last = builder.flush()
    if last is not None:
        yield last
