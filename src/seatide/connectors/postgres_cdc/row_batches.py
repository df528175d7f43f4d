"""Postgres-CDC rows as Spark takes them: text values by column name -> Arrow record batches,
in each table's column order, tagged by table when the source reads several."""

from __future__ import annotations

from typing import Iterator

from seatide.connectors.decimals import DecimalOverflow
from seatide.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST
from seatide.connectors.postgres_cdc.tables import CapturedTable
from seatide.connectors.postgres_cdc.values import column_type
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.tables import TableLayout

_ARROW_BATCH_ROWS = 8192


class RowBatches:
    """Text values by column name -> Arrow record batches, one table's rows at a time: in the
    table's own column order (one table), or tagged by table (several, ``layout``)."""

    def __init__(self, tables: list[CapturedTable], spark_time_zone: str, layout: TableLayout | None = None):
        self.tables, self.zone, self.layout = tables, spark_time_zone, layout
        self.pending: dict[int, TableRows] = {}

    def add(self, kind: int, table: int, values: dict) -> Iterator:
        rows = self.pending.get(table)
        if rows is None:
            rows = self.pending[table] = TableRows(self.tables[table], self.zone)
        rows.add(kind, values)
        if rows.count >= _ARROW_BATCH_ROWS:
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

    def __init__(self, table: CapturedTable, spark_time_zone: str):
        self.table = table
        self.names = [c.name for c in table.columns]
        self.types = {c.name: column_type(c.seatunnel, spark_time_zone, c.typname) for c in table.columns}
        self.columns: list[list] = [[] for _ in range(len(self.names) + 1)]

    @property
    def count(self) -> int:
        return len(self.columns[-1])

    def add(self, kind: int, values: dict) -> None:
        for column, name in zip(self.columns, self.names):
            text = values.get(name)
            column.append(None if text is None or text is UNCHANGED_TOAST else self._convert(name, text))
        self.columns[-1].append(kind)

    def _convert(self, name: str, text: str):
        try:
            return self.types[name].convert(text)
        except DecimalOverflow as exc:
            raise permanent_in_worker(
                f"Postgres-CDC: table {self.table.qualified} column {name}: {exc}. SeaTide never "
                "turns such a value into null: give the column a precision Spark holds (numeric(p, s), "
                "p <= 38) and restart the job from a fresh checkpoint, or change the value") from None

    def flush(self):
        import pyarrow as pa

        if not self.columns[-1]:
            return None
        arrays = [pa.array(values, self.types[name].arrow) for values, name in zip(self.columns, self.names)]
        arrays.append(pa.array(self.columns[-1], pa.int8()))
        self.columns = [[] for _ in range(len(self.names) + 1)]
        return pa.RecordBatch.from_arrays(arrays, names=[*self.names, ROW_KIND_COLUMN])
