"""Whole rows from partial row images.

A session may set ``binlog_row_image = MINIMAL`` or ``NOBLOB`` whatever the server's
default (the job checks only the global setting): an UPDATE then logs in its after image
only the columns it set (MINIMAL; not even the key), a DELETE and a before image only the
key, an INSERT only the columns given. A column left out is not null, and an upsert of null
would overwrite the target's value. So a row image's missing columns are taken from the
update's before image when it has them, and otherwise read from the table by the row's key,
as it is when the batch is read. That value may be newer than the change's own; the later
changes that made it newer follow in the binlog, so the target ends equal to the source.
Before images and deleted rows keep nulls: a sink applies them by key alone.
"""

from __future__ import annotations

from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.connectors.mysql_cdc.snapshot import quote
from seatide.plugin.base import permanent_in_worker

MISSING = object()   # a column the row image left out (never leaves this process)


class RowCompleter:
    """Fills missing columns by key, one query per table and binlog event; one connection per read."""

    def __init__(self, config: ServerConfig):
        self.config, self._conn = config, None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def complete(self, table: CapturedTable, rows: list[list]) -> list[list]:
        """``rows`` (after images, values in column order) with every MISSING filled by key."""
        wanted = [row for row in rows if any(v is MISSING for v in row)]
        if not wanted:
            return rows
        names = [c.name for c in table.columns]
        positions = [names.index(k) for k in table.key]
        if not positions or any(row[p] is MISSING for row in wanted for p in positions):
            raise permanent_in_worker(
                f"MySQL-CDC: a binlog row of {table.name} lacks columns (the writing session set "
                "binlog_row_image to MINIMAL or NOBLOB) and the table has no key to read them by. Set "
                "binlog_row_image = FULL for every session that writes it, and restart the job from a "
                "fresh checkpoint")
        found = self._rows_by_key(table, positions, {tuple(row[p] for p in positions) for row in wanted})
        for row in wanted:
            now = found.get(tuple(row[p] for p in positions))
            for i, value in enumerate(row):
                if value is MISSING:
                    row[i] = None if now is None else now[i]
        return rows

    def _rows_by_key(self, table: CapturedTable, positions: list[int], keys: set) -> dict:
        if self._conn is None:
            self._conn = self.config.connect()
            with self._conn.cursor() as cur:
                cur.execute("SET time_zone = '+00:00'")    # TIMESTAMP values in UTC, as the binlog has them
        columns = ", ".join(quote(c.name) for c in table.columns)
        key = "(" + ", ".join(quote(table.columns[p].name) for p in positions) + ")"
        marks = ", ".join(["(" + ", ".join(["%s"] * len(positions)) + ")"] * len(keys))
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT {columns} FROM {quote(table.database)}.{quote(table.table)} WHERE {key} IN ({marks})",
                        [v for k in keys for v in k])
            return {tuple(row[p] for p in positions): list(row) for row in cur.fetchall()}
