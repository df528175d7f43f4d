"""Whole rows from partial row images.

A session may set ``binlog_row_image = MINIMAL`` or ``NOBLOB`` whatever the server's
default (the job checks only the global setting): an UPDATE then logs in its after image
only the columns it set (MINIMAL; not even the key), a DELETE and a before image only the
key, an INSERT only the columns given (the image's column bitmap says which: ``image_values``).
A column left out is not null, and an upsert of null would overwrite the target's value. So a
row image's missing columns are taken from the update's before image when it has them, and
otherwise read from the table by the row's key, as it is when the batch is read. That value may be newer than the change's own; the later
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

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.mysql_cdc.binlog_values import EMPTY_SET, LEFT_OUT
from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.connectors.mysql_cdc.row_keys import compared, key_positions, read_back
from seatide.connectors.mysql_cdc.snapshot import quote
from seatide.plugin.base import permanent_in_worker

MISSING = object()   # a column the row image left out (never leaves this process)


# A row image's values, why a value is None, and which columns it holds (a bit each, in order).
_IMAGES = {"values": ("values", "none_sources", "columns_present_bitmap"),
           "before": ("before_values", "before_none_sources", "columns_present_bitmap"),
           "after": ("after_values", "after_none_sources", "columns_present_bitmap2")}


def image_values(event, row: dict, image: str, table: CapturedTable, named: bool) -> list:
    """One image (``values``, ``before``, ``after``) of a row event's row, as ``_values`` gives it."""
    values, sources, bitmap = _IMAGES[image]
    return _values(row[values], row[sources], table, named, getattr(event, bitmap, None))


def _values(values: dict, none_sources: dict, table: CapturedTable, named: bool = False,
            bitmap: bytes | None = None) -> list:
    # Values come in column order; without binlog_row_metadata = FULL their names may be
    # placeholders, so we match them to the table's columns by position, unless the table changed
    # since the job read it (``named``: the binlog names each value's column). A column the image
    # left out is told by the image's bitmap: without FULL metadata the decoder files its reason
    # under no name and reports the column as null (mysql-replication 1.0).
    if bitmap is not None and int.from_bytes(bitmap, "little").bit_count() < len(values):
        left = [name for i, name in enumerate(values) if not bitmap[i // 8] >> i % 8 & 1]
        none_sources = {**none_sources, **dict.fromkeys(left, LEFT_OUT)}
    if named:
        row = []
        for name, convert in table.converters_by_name.items():
            value = values.get(name)
            reason = none_sources.get(name) if name in values else None
            row.append(("" if reason == EMPTY_SET else MISSING if reason == LEFT_OUT else None) if value is None
                       else convert(value))
        return row
    width = len(table.live)
    if len(values) != width:
        raise permanent_in_worker(
            f"MySQL-CDC: a binlog row of {table.name} has {len(values)} columns but the table had "
            f"{width} when the job started; schema changes are not followed. To capture the table as it is "
            f"now, {START_OVER}")
    row = []
    for (name, value), convert in zip(values.items(), table.binlog_converters):
        if value is None:
            reason = none_sources.get(name)
            row.append("" if reason == EMPTY_SET else MISSING if reason == LEFT_OUT else None)
        else:
            row.append(convert(value))
    return row + [None] * (len(table.described) - width)     # retired columns: none in a row of today


def left_out_as_null(values: list) -> list:
    """A before image or deleted row: what it left out stays null (it is applied by key)."""
    return [None if v is MISSING else v for v in values]


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
