"""Postgres-CDC rows as Spark takes them: text values by column name -> Arrow record batches,
in each table's column order, tagged by table when the source reads several.

Every row carries its place in the order the partition read it in (``__row_seq``,
plugin.rowkind): a change batch is one partition reading its transactions in commit order, so
the number orders one key's changes however a transform moves them; Spark cannot number a
stream's rows for us. The snapshot's splits of one batch start apart (``first_seq``)."""

from __future__ import annotations

from typing import Iterator

from seatide.connectors.decimals import DecimalOverflow
from seatide.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST
from seatide.connectors.postgres_cdc.tables import CapturedTable
from seatide.connectors.postgres_cdc.values import FAIL, UnrepresentableValue, column_type
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN
from seatide.plugin.tables import TableLayout

_ARROW_BATCH_ROWS = 8192
# ... or this many bytes of text: one Arrow string array holds at most 2 GiB, and rows of megabytes
# would make a batch of 8,192 rows a burden to the Python worker and the JVM that takes it
_ARROW_BATCH_BYTES = 16 << 20


class RowBatches:
    """Text values by column name -> Arrow record batches, one table's rows at a time: in the
    table's own column order (one table), or tagged by table (several, ``layout``). Rows are
    numbered as they are added, from ``first_seq`` on, across tables."""

    def __init__(self, tables: list[CapturedTable], spark_time_zone: str, layout: TableLayout | None = None,
                 first_seq: int = 0, infinity: str = FAIL):
        self.tables, self.zone, self.layout, self.infinity = tables, spark_time_zone, layout, infinity
        self.pending: dict[int, TableRows] = {}
        self.next_seq = first_seq

    def add(self, kind: int, table: int, values: dict) -> Iterator:
        rows = self.pending.get(table)
        if rows is None:
            rows = self.pending[table] = TableRows(self.tables[table], self.zone, self.infinity)
        rows.add(kind, values, self.next_seq)
        self.next_seq += 1
        if rows.count >= _ARROW_BATCH_ROWS or rows.text_bytes >= _ARROW_BATCH_BYTES:
            yield from self._flush(table)

    def flush(self) -> Iterator:
        for table in list(self.pending):
            yield from self._flush(table)

    def _flush(self, table: int) -> Iterator:
        batch = self.pending[table].flush()
        if batch is not None:
            yield batch if self.layout is None else self.layout.tag(batch, table)


class TableRows:
    """One table's rows, column by column, converted to the Spark schema's values."""

    def __init__(self, table: CapturedTable, spark_time_zone: str, infinity: str = FAIL):
        self.table = table
        self.names = [c.name for c in table.columns]
        self.types = {c.name: column_type(c.seatunnel, spark_time_zone, c.typname, infinity) for c in table.columns}
        self._reset()

    def _reset(self) -> None:
        self.columns: list[list] = [[] for _ in self.names]
        self.kinds: list[int] = []
        self.seqs: list[int] = []
        self.text_bytes = 0            # of the values' text (as read), roughly what the batch holds

    @property
    def count(self) -> int:
        return len(self.kinds)

    def add(self, kind: int, values: dict, seq: int) -> None:
        for column, name in zip(self.columns, self.names):
            text = values.get(name)
            if text is None or text is UNCHANGED_TOAST:
                column.append(None)
            else:
                column.append(self._convert(name, text))
                self.text_bytes += len(text)
        self.kinds.append(kind)
        self.seqs.append(seq)

    def _convert(self, name: str, text: str):
        try:
            return self.types[name].convert(text)
        except DecimalOverflow as exc:
            raise permanent_in_worker(
                f"Postgres-CDC: table {self.table.qualified} column {name}: {exc}. SeaTide never "
                "turns such a value into null: give the column a precision Spark holds (numeric(p, s), "
                "p <= 38) and restart the job from a fresh checkpoint, or change the value") from None
        except UnrepresentableValue as exc:
            raise permanent_in_worker(
                f"Postgres-CDC: table {self.table.qualified} column {name}: {exc}. SeaTide never turns such a "
                "value into null: change the value, or leave the table out") from None

    def flush(self):
        import pyarrow as pa

        if not self.kinds:
            return None
        arrays = [pa.array(values, self.types[name].arrow) for values, name in zip(self.columns, self.names)]
        arrays += [pa.array(self.kinds, pa.int8()), pa.array(self.seqs, pa.int64())]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=[*self.names, ROW_KIND_COLUMN, ROW_SEQ_COLUMN])
