"""Column ids of a captured table across Relation messages: pg_attribute.attnum.

A Relation message lists a table's columns as they were in its transaction, in attnum order
(dropped and generated columns left out), by name and type only. Two changes with no row of
the table between them arrive as one Relation, so comparing it with the kept shape by name and
position can take a rename for a drop and an add. attnum tells them apart: a rename keeps its
attnum, a dropped column keeps its attnum (attisdropped), an added column gets a new one.

The ids of a Relation's columns are read from the catalog when the query starts again
(``relation_ids``): exact when the catalog still describes the table as the Relation does. When
the catalog is already further on and disagrees, they come from the kept shape only where the
difference is one change that cannot be read two ways; otherwise the job fails, never guesses.
"""

from __future__ import annotations

from seatide.connectors.cdc_way_out import START_OVER

# Every column pg_attribute has for the table, dropped ones included (attname is then
# "........pg.dropped.N........"); pgoutput leaves generated columns out.
CATALOG = """
SELECT attnum, attname, attisdropped, atttypid, atttypmod FROM pg_attribute
WHERE attrelid = %s::regclass AND attnum > 0 AND attgenerated = '' ORDER BY attnum"""


class ShapeError(ValueError):
    """A Relation whose columns the catalog and the kept shape cannot identify for sure."""


def catalog_columns(conn, regclass: str) -> list[tuple]:
    """(attnum, name, dropped, type oid, typmod) of every column of the table now."""
    return [tuple(r) for r in conn.execute(CATALOG, (regclass,)).fetchall()]


def relation_ids(table: str, relation: list[list], catalog: list[tuple],
                 known: list[tuple] | None) -> list[int | None]:
    """The attnum of each column of ``relation`` ([name, type oid, typmod] each).

    ``catalog``: ``catalog_columns`` now; ``known``: the live columns of the kept shape,
    (name, type oid, typmod, id) each (id None in shapes kept before ids were). None where no
    id can be told (a kept shape without ids: the changes are then found by name)."""
    live = {name: (attnum, oid, mod) for attnum, name, dropped, oid, mod in catalog if not dropped}
    found = [live.get(name) for name, _, _ in relation]
    if all(f is not None and (f[1], f[2]) == (oid, mod) for f, (_, oid, mod) in zip(found, relation)) and \
            all(a[0] < b[0] for a, b in zip(found, found[1:])):
        return [f[0] for f in found]                    # the catalog is still as the Relation says: exact
    if known is None:
        return [None] * len(relation)
    ids = _one_change(relation, known, live)
    if ids is None:
        raise ShapeError(
            f"the columns of table {table} changed more than once with no row of it in between, and the "
            f"server's catalog has changed since, so which column became which cannot be told for sure: the "
            f"job read it with columns ({', '.join(k[0] for k in known)}), the stream now shows "
            f"({', '.join(r[0] for r in relation)}) and the catalog has "
            f"({', '.join(n for _, n, dropped, _, _ in catalog if not dropped)}). Rather than guess (a rename "
            f"taken for a drop and an add would null the column's older values in the target), the job "
            f"stops. To copy the table as it is now, {START_OVER}")
    return ids


def _one_change(relation: list[list], known: list[tuple], live: dict) -> list | None:
    """The ids of ``relation``'s columns when one change (add at the end, drop, rename in place,
    retype) turns ``known`` into it, and only that change can; None otherwise."""
    new = [tuple(r) for r in relation]
    old = [tuple(k[:3]) for k in known]
    ids = [k[3] for k in known]
    names_new, names_old = [n[0] for n in new], [o[0] for o in old]
    if len(new) == len(old):
        differ = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
        if len(differ) != 1:
            return ids if not differ else None
        i = differ[0]
        if names_old[i] == names_new[i]:
            return ids                                  # retyped in place
        # renamed in place: only if it is not the last column, where a drop and an add look the same
        if old[i][1:] == new[i][1:] and i < len(new) - 1 and names_new[i] not in names_old:
            return ids
        return None
    if len(new) == len(old) + 1 and new[:-1] == old:   # added: PostgreSQL adds at the end
        name, oid, mod = new[-1]
        now = live.get(name)
        known_ids = [i for i in ids if i is not None]
        if now is not None and (now[1], now[2]) == (oid, mod) and all(now[0] > i for i in known_ids):
            return [*ids, now[0]]
        return [*ids, None] if not known_ids else None
    if len(new) == len(old) - 1:
        for i in range(len(old)):
            if old[:i] + old[i + 1:] == new:
                return ids[:i] + ids[i + 1:]            # dropped
    return None


__all__ = ["ShapeError", "catalog_columns", "relation_ids"]
