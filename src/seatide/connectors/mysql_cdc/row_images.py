"""Whole rows from partial row images.

A session may set ``binlog_row_image = MINIMAL`` or ``NOBLOB`` whatever the server's
default (the job checks only the global setting): an UPDATE then logs in its after image
only the columns it set (MINIMAL; not even the key), a DELETE and a before image only the
key, an INSERT only the columns given. A column left out is not null, and an upsert of null
would overwrite the target's value. So a row image's missing columns are taken from the
update's before image when it has them, and otherwise read from the table by the row's key,
as it is when the batch is read. That value may be newer than the change's own; the later
changes that made it newer follow in the binlog, so the target ends equal to the source.
Before images and deleted rows keep nulls: a sink applies them by key alone. The key is compared
in the form the server stores (row_keys). An after image whose row is gone when read (a later
change removed its key) is not completed: ``complete`` gives None for it (gone_rows).

Only the columns the table has are read: a shape that follows schema changes keeps a dropped or
renamed column (retired) for rows from before the change, and the table no longer has it (a row
of today has none there). A row of an older shape read after the server has changed the table
further (a replay) is read from the columns of its shape the table still has; the others stay
null, as a dropped column does.
"""

from __future__ import annotations

import pymysql

from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.connectors.mysql_cdc.row_keys import compared, key_positions, read_back
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

    def complete(self, table: CapturedTable, rows: list[list]) -> list[list | None]:
        """``rows`` (after images, values in column order) with every MISSING filled by key; None in
        place of a row the table no longer has."""
        wanted = [row for row in rows if any(v is MISSING for v in row)]
        if not wanted:
            return rows
        names = [c.name for c in table.columns]
        positions = key_positions(table)
        if not positions or any(row[p] is MISSING for row in wanted for p in positions):
            raise permanent_in_worker(
                f"MySQL-CDC: a binlog row of {table.name} lacks columns (the writing session set "
                "binlog_row_image to MINIMAL or NOBLOB) and the table has no key to read them by. Set "
                "binlog_row_image = FULL for every session that writes it, and restart the job from a "
                "fresh checkpoint")
        forms = compared(table)
        key = {id(row): tuple(form(row[p]) for form, p in zip(forms, positions)) for row in wanted}
        found = self._rows_by_key(table, set(key.values()))
        gone = set()
        for row in wanted:
            now = found.get(key[id(row)])
            if now is None:
                gone.add(id(row))
                continue
            for i, value in enumerate(row):
                if value is MISSING:
                    row[i] = now.get(names[i])
        return [None if id(row) in gone else row for row in rows]

    def _rows_by_key(self, table: CapturedTable, keys: set) -> dict:
        """Each key's row now, as {column: value}, of the columns of ``table`` the server has; keys
        in the form ``row_keys.compared`` gives."""
        if self._conn is None:
            self._conn = self.config.connect()
            with self._conn.cursor() as cur:
                cur.execute("SET time_zone = '+00:00'")    # TIMESTAMP values in UTC, as the binlog has them
        names = [row[0] for row in table.live]
        try:
            return self._select(table, names, keys)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != _UNKNOWN_COLUMN:
                raise
        with self._conn.cursor() as cur:        # a row of an older shape: the table has changed since
            cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_NAME = %s", (table.database, table.table))
            there = {r[0].lower() for r in cur.fetchall()}
        return self._select(table, [n for n in names if n.lower() in there], keys)

    def _select(self, table: CapturedTable, names: list[str], keys: set) -> dict:
        where = "(" + ", ".join(quote(k) for k in table.key) + ")"
        marks = ", ".join(["(" + ", ".join(["%s"] * len(table.key)) + ")"] * len(keys))
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT {', '.join([quote(n) for n in names] + read_back(table))} FROM "
                        f"{quote(table.database)}.{quote(table.table)} WHERE {where} IN ({marks})",
                        [v for k in keys for v in k])
            return {tuple(row[len(names):]): dict(zip(names, row)) for row in cur.fetchall()}


_UNKNOWN_COLUMN = 1054      # ER_BAD_FIELD_ERROR
