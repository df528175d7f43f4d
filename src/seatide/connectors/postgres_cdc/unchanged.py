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

from seatide.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST
from seatide.connectors.postgres_cdc.membership import TableGone
from seatide.connectors.postgres_cdc.tables import CapturedTable, TableError, current_values
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
