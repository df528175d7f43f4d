"""Values pgoutput leaves out of an UPDATE, read back from the table by key.

An UPDATE that does not change a large (TOASTed) value sends it as "unchanged" (``'u'``)
instead of its bytes. Under ``REPLICA IDENTITY FULL`` the old row carries it and the stream
takes it from there; under the default identity nothing does, and a null in its place would
be upserted over the target's copy. So such a value is read from the table by the row's
identity key when the batch is read: its value now. That may be newer than the change's own
(a later UPDATE set it again), and a later change in the stream then brings the row to that
same state; a row that is gone now was deleted or re-keyed later, which the stream delivers
too (until then its value is null). Either way the target ends equal to the source: the
change stream converges, though a row between two batches may show a value from its future.
A column renamed or dropped after the change is found by its attnum (a dropped one reads null:
the stream's later Relation message then carries the drop itself).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from psycopg import errors, sql

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST
from seatide.connectors.postgres_cdc.membership import TableGone, table_dropped
from seatide.connectors.postgres_cdc.tables import CapturedTable, TableError
from seatide.plugin.base import permanent_in_worker

_CHUNK_ROWS = 1000   # rows resolved per round of queries (one query per table and round)


def with_unchanged_values(rows: Iterable[tuple], tables: list[CapturedTable],
                          connect: Callable[[], object]) -> Iterator[tuple]:
    """``rows`` ((kind, table index, column -> text) triples), with every unchanged marker
    replaced by the table's current value (None when the row is gone)."""
    conn = None
    chunk: list[tuple] = []
    try:
        for row in rows:
            chunk.append(row)
            if len(chunk) >= _CHUNK_ROWS:
                conn = conn or _needs(chunk) and connect()
                yield from _resolved(conn, tables, chunk)
                chunk = []
        if chunk:
            conn = conn or _needs(chunk) and connect()
            yield from _resolved(conn, tables, chunk)
    finally:
        if conn:
            conn.close()


def _needs(chunk: list[tuple]) -> bool:
    return any(v is UNCHANGED_TOAST for _, _, values in chunk for v in values.values())


def _resolved(conn, tables: list[CapturedTable], chunk: list[tuple]) -> list[tuple]:
    if not conn:
        return chunk
    wanted: dict[int, tuple[set, set]] = {}          # table -> (keys, columns)
    for _, index, values in chunk:
        missing = [k for k, v in values.items() if v is UNCHANGED_TOAST]
        if missing:
            keys, columns = wanted.setdefault(index, (set(), set()))
            keys.add(tuple(values.get(k) for k in tables[index].identity_key))
            columns.update(missing)
    try:
        found = {index: current_values(conn, tables[index], sorted(keys, key=str), sorted(columns))
                 for index, (keys, columns) in wanted.items()}
    except TableGone as exc:
        raise permanent_in_worker(str(exc)) from None
    except TableError as exc:
        raise permanent_in_worker(f"Postgres-CDC: {exc}") from None
    out = []
    for kind, index, values in chunk:
        if any(v is UNCHANGED_TOAST for v in values.values()):
            now = found[index].get(tuple(values.get(k) for k in tables[index].identity_key), {})
            values = {k: now.get(k) if v is UNCHANGED_TOAST else v for k, v in values.items()}
        out.append((kind, index, values))
    return out


# Reading a row back by key lives here, beside its one user, and not in tables.py: it raises
# membership's TableGone, and membership reads CapturedTable from tables.py.
_ATTRIBUTES = "SELECT attnum, attname, attisdropped FROM pg_attribute WHERE attrelid = %s::oid AND attnum > 0"


def current_values(conn, table: CapturedTable, keys: list[tuple[str, ...]], columns: list[str]) -> dict:
    """The rows of ``table`` with these identity keys (text, as pgoutput sends them) now: key ->
    {column: text}. A key whose row is gone is missing from the result; a row found whose key
    prints otherwise than asked raises TableError.

    ``columns`` and the key columns are named as the stream named them; the table may have been
    changed since (a later ALTER TABLE), so each is found by its attnum, which a rename keeps: a
    column dropped since reads null. Raises TableGone when the table itself is gone."""
    now = _names_now(conn, table, [*table.identity_key, *columns])
    if any(now[k] is None for k in table.identity_key):
        raise TableError(f"a key column of table {table.qualified} ({', '.join(table.identity_key)}) was dropped "
                         f"while the job ran, so a value an UPDATE left unchanged cannot be read by key: {START_OVER}")
    types = {c.name: c.sql_type for c in table.columns}
    names, read = table.identity_key, [c for c in columns if now[c] is not None]
    wanted = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(now[c])) for c in [*names, *read])
    literal = [sql.SQL("({})").format(sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Literal(v), sql.SQL(types[k])) for k, v in zip(names, key))) for key in keys]
    query = sql.SQL("SELECT {} FROM {} WHERE ({}) IN ({})").format(
        wanted, sql.SQL(_relation_now(conn, table)), sql.SQL(", ").join(sql.Identifier(now[k]) for k in names),
        sql.SQL(", ").join(literal))
    try:
        rows = conn.execute(query).fetchall()
    except errors.UndefinedTable:           # dropped since the catalog was read
        raise table_dropped(conn, table) from None
    found, asked = {}, set(keys)
    for row in rows:
        key = tuple(row[:len(names)])
        if key not in asked:
            # found by value but printed otherwise than the stream printed it: the sessions'
            # settings differ (replication.session_settings); matching by text would miss the row
            # and write null over its value, so fail instead
            raise TableError(f"table {table.qualified}: the row with key {list(key)} was found for a value an "
                             "UPDATE left unchanged, but the stream printed its key otherwise (among "
                             f"{sorted(map(list, asked))}), so the value cannot be matched to its change. The "
                             "replication and lookup sessions must print values alike (TimeZone, DateStyle): "
                             "report this, with the key column's type")
        found[key] = {**dict.fromkeys(columns), **dict(zip(read, row[len(names):]))}
    return found


def _names_now(conn, table: CapturedTable, names: list[str]) -> dict[str, str | None]:
    """Each column (as the stream named it) -> its name in the catalog now (None: dropped since)."""
    if not table.oid:
        return {name: name for name in names}     # described before oids were: by name, as then
    catalog = {int(n): (name, dropped) for n, name, dropped in conn.execute(_ATTRIBUTES, (table.oid,)).fetchall()}
    if not catalog:
        raise table_dropped(conn, table)
    live = {name for name, dropped in catalog.values() if not dropped}
    ids = {c.name: c.attnum for c in table.columns}
    now = {}
    for name in names:
        attnum = ids.get(name)
        if attnum is not None:
            entry = catalog.get(attnum)
            now[name] = None if entry is None or entry[1] else entry[0]
        elif name in live:
            now[name] = name
        else:
            raise TableError(f"column {name} of table {table.qualified} was renamed or dropped while the job ran, "
                             "and the shape the job keeps of the table has no column ids (it was kept before they "
                             f"were), so a value an UPDATE left unchanged cannot be found: {START_OVER}")
    return now


def _relation_now(conn, table: CapturedTable) -> str:
    """The table's name now (by its oid: a renamed table is read under its new name)."""
    if not table.oid:
        return table.ident().as_string(conn)
    return conn.execute("SELECT %s::oid::regclass::text", (table.oid,)).fetchone()[0]
