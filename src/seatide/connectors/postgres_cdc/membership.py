"""Whether each captured table is still the table the publication publishes.

PostgreSQL logs no row for a ``DROP TABLE`` and removes the dropped table from every publication:
a table created again under the same name is a new relation (a new oid) that no publication
lists, so its changes are never decoded. A renamed table stays published, and its changes carry
the new name. None of these reach the stream as a message the source could apply, and each would
leave the target silently different from the source for good: the dropped rows stay, later
changes are lost. So the reader fails instead, naming what happened and the way out:

* when it plans a batch (``check_published``: each table's oid, recorded when the job started,
  is in the publication and still has its name), and when a snapshot split finds its table gone;
* when a change of a table arrives under another oid or another name than the job recorded
  (``relation_moved``), which also covers a batch replayed after a restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.connectors.cdc_way_out import START_OVER

if TYPE_CHECKING:
    from seatide.connectors.postgres_cdc.tables import CapturedTable

_PUBLISHED = """
SELECT int8(r.prrelid) FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid WHERE p.pubname = %s"""
_NAMED = "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s::oid"
_NAMED_ALL = """
SELECT int8(c.oid), n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY(%s::oid[])"""
_WHY = ("DROP TABLE and renames have no row kind: the target would keep rows the source no longer has and "
        "miss every later change")


class TableGone(ValueError):
    """A captured table that is not the one the job started with any more; the message says why."""


def check_published(conn, publication: str, tables: list["CapturedTable"]) -> None:
    """Raise TableGone unless every table (by the oid recorded when the job started) is in
    ``publication`` under its own name. Two catalog queries, whatever the number of tables."""
    tables = [t for t in tables if t.oid]     # a table described before oids were recorded: not checked
    published = {row[0] for row in conn.execute(_PUBLISHED, (publication,)).fetchall()}
    named = {int(row[0]): (row[1], row[2]) for row in conn.execute(_NAMED_ALL, ([t.oid for t in tables],)).fetchall()}
    for table in tables:
        if named.get(table.oid) == (table.schema, table.name) and table.oid in published:
            continue
        why = _moved(conn, table) or (f"is not in publication {publication} any more (dropped and created again, "
                                      "or taken out with ALTER PUBLICATION ... DROP TABLE)")
        raise TableGone(gone_message(table.qualified, why))


def _moved(conn, table: "CapturedTable") -> str | None:
    """What became of the table's relation, when it is not the table of that name any more."""
    row = conn.execute(_NAMED, (table.oid,)).fetchone()
    if row is None:
        again = conn.execute("SELECT to_regclass(%s)", (table.ident().as_string(conn),)).fetchone()[0]
        return "was dropped and created again" if again is not None else "was dropped"
    if (row[0], row[1]) != (table.schema, table.name):
        return f"was renamed to {row[0]}.{row[1]}"
    return None


def table_dropped(conn, table: "CapturedTable") -> TableGone:
    """The error for a statement that found ``table`` missing (a snapshot split, a lookup by key)."""
    return TableGone(gone_message(table.qualified, (table.oid and _moved(conn, table)) or "was dropped"))


def relation_moved(relation, table: "CapturedTable") -> str | None:
    """The error text when a change's Relation (its oid, schema and name) and the captured table
    match by name but not by oid, or by oid but not by name; None when they are the same table."""
    if not table.oid:
        return None
    same_name = (relation.schema, relation.name) == (table.schema, table.name)
    if same_name and relation.oid != table.oid:
        return gone_message(table.qualified, "was dropped and created again")
    if not same_name and relation.oid == table.oid:
        return gone_message(table.qualified, f"was renamed to {relation.schema}.{relation.name}")
    return None


def gone_message(table: str, why: str) -> str:
    return (f"Postgres-CDC: table {table} {why} while the job ran; PostgreSQL publishes no change for that, "
            f"and {_WHY}. Empty the target table and {START_OVER}")
