"""The captured tables: names resolved against the server, their columns, keys and snapshot pages.

A snapshot split is a page of a table in key order: rows with key > ``after`` and
<= ``upto`` (either end open). Keys travel as text and are cast back to the key columns'
types, so offsets stay plain JSON. A table without a key is one split.
"""

from __future__ import annotations

import re

from dataclasses import dataclass

from psycopg import sql
from psycopg._encodings import pg2pyenc

from seatide.connectors.pg_types import is_portable, lookup
from seatide.connectors.postgres_cdc.values import UnsupportedType, seatunnel_type


class TableError(ValueError):
    """A table that cannot be captured; the message says which and why."""


@dataclass(frozen=True)
class TableColumn:
    name: str
    typname: str           # pg_type.typname of the column's type (a domain's base type)
    sql_type: str          # format_type(): what a key's text is cast back to
    seatunnel: str
    declared: str | None = None   # the (base) type a table in another PostgreSQL database can declare
    type_oid: int = 0      # pg_attribute.atttypid and atttypmod, as pgoutput's Relation messages name them
    typmod: int = -1
    retired: bool = False  # dropped or renamed since the job started: only rows from before carry it
    attnum: int | None = None   # pg_attribute.attnum: kept by a rename (shapes.py); None in shapes kept before
    # NOT NULL and DEFAULT (["literal", v], ["now", None] or ["expression", text]; plugin/types.py),
    # from the catalog: a sink that adds the column defines it so (pgoutput carries neither)
    not_null: bool = False
    default: list | None = None

    def to_json(self) -> list:
        return [self.name, self.typname, self.sql_type, self.seatunnel, self.declared, self.type_oid, self.typmod,
                self.retired, self.attnum, self.not_null, self.default]


@dataclass(frozen=True)
class CapturedTable:
    schema: str
    name: str
    columns: tuple[TableColumn, ...]
    keys: tuple[str, ...]
    # What an UPDATE or DELETE logs of the old row: "full" (every column), "key" (the primary
    # key or the replica identity index, whose columns are ``identity_key``).
    identity: str = "key"
    identity_key: tuple[str, ...] = ()
    # Each column's type oid when the job started (pgoutput's Relation messages name them: a
    # column whose type changed is not read with the old type's converter), and the
    # database's encoding, which pgoutput's text is in.
    type_oids: tuple[tuple[str, int], ...] = ()
    encoding: str = "utf-8"
    # pg_class.oid when the job started (0: described before it was recorded): a table of this
    # name with another oid was dropped and created again (membership.py)
    oid: int = 0

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def live(self) -> tuple[TableColumn, ...]:
        """The columns the table has (not the retired ones)."""
        return tuple(c for c in self.columns if not c.retired)

    def ident(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.name)

    def to_json(self) -> dict:
        return {"schema": self.schema, "name": self.name, "keys": list(self.keys), "identity": self.identity,
                "identity_key": list(self.identity_key), "type_oids": [list(t) for t in self.type_oids],
                "encoding": self.encoding, "oid": self.oid,
                "columns": [c.to_json() for c in self.columns]}

    @classmethod
    def from_json(cls, data: dict) -> "CapturedTable":
        return cls(data["schema"], data["name"], tuple(TableColumn(*c) for c in data["columns"]),
                   tuple(data["keys"]), data.get("identity", "key"), tuple(data.get("identity_key", ())),
                   tuple(tuple(t) for t in data.get("type_oids", ())), data.get("encoding", "utf-8"),
                   data.get("oid", 0))


def split_name(text: str, database: str, default_schema: str) -> tuple[str, str, str]:
    """database.schema.table, schema.table or table -> (database, schema, table)."""
    parts = [p.strip().strip('"') for p in text.split(".")]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return database, parts[0], parts[1]
    if len(parts) == 1 and parts[0]:
        return database, default_schema, parts[0]
    raise TableError(f"'{text}' is not a table name: write database.schema.table")


# Each column with its base type: a domain's values are its base type's, so a column of a
# domain (of a domain...) is typed by the type at the bottom, with that domain's modifier.
_COLUMNS = """
SELECT a.attname, base.oid, base.typmod, format_type(a.atttypid, a.atttypmod), format_type(base.oid, base.typmod),
       a.atttypid, a.atttypmod, a.attnum
FROM pg_attribute a CROSS JOIN LATERAL (
    WITH RECURSIVE chain(oid, typmod, depth) AS (
        SELECT a.atttypid, a.atttypmod, 0
        UNION ALL
        SELECT t.typbasetype, t.typtypmod, chain.depth + 1 FROM chain JOIN pg_type t ON t.oid = chain.oid
        WHERE t.typtype = 'd')
    SELECT oid, typmod FROM chain ORDER BY depth DESC LIMIT 1) base
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"""
_PRIMARY_KEY = """
SELECT a.attname FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = %s::regclass AND i.indisprimary
ORDER BY array_position(i.indkey::int2[], a.attnum)"""
_REPLICA_IDENTITY = "SELECT relreplident FROM pg_class WHERE oid = %s::regclass"
_TYPE_OIDS = "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
_IDENTITY_INDEX = """
SELECT a.attname FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = %s::regclass AND i.indisreplident
ORDER BY array_position(i.indkey::int2[], a.attnum)"""


def describe(conn, schema: str, name: str, keys: list[str] | None) -> CapturedTable:
    regclass = sql.Identifier(schema, name).as_string(conn)
    exists = conn.execute("SELECT int8(to_regclass(%s)::oid)", (regclass,)).fetchone()[0]
    if exists is None:
        raise TableError(f"table {schema}.{name} does not exist in database "
                         f"{conn.info.dbname}: check table-names")
    described = conn.execute(_COLUMNS, (regclass,)).fetchall()
    columns = _columns(conn, f"{schema}.{name}", described, regclass)
    primary = [row[0] for row in conn.execute(_PRIMARY_KEY, (regclass,)).fetchall()]
    chosen = keys or primary
    missing = [k for k in chosen if k not in {c.name for c in columns}]
    if missing:
        raise TableError(f"table-names-config gives primaryKeys {missing} for {schema}.{name}, "
                         f"which has no such column")
    setting = conn.execute(_REPLICA_IDENTITY, (regclass,)).fetchone()[0]
    if setting == "n" or (setting == "d" and not primary):
        # A publication on such a table makes PostgreSQL refuse the application's own UPDATE
        # and DELETE on it ("does not have a replica identity and publishes updates"), and
        # primaryKeys in table-names-config change nothing about that: refuse before creating it.
        raise TableError(
            f"table {schema}.{name} has no primary key and no replica identity, so PostgreSQL cannot "
            "log which row an UPDATE or DELETE changed; capturing it would make the application's own "
            f"UPDATE and DELETE on it fail. Run ALTER TABLE {schema}.{name} REPLICA IDENTITY FULL (or add "
            "a primary key) and start the job again")
    identity_key = [] if setting == "f" else primary if setting == "d" else \
        [r[0] for r in conn.execute(_IDENTITY_INDEX, (regclass,)).fetchall()]
    if setting == "i" and not chosen:
        chosen = identity_key       # a unique index on NOT NULL columns: the table's own key
    if setting != "f" and not set(chosen) <= set(identity_key):
        raise TableError(narrow_identity(f"{schema}.{name}", chosen, identity_key))
    oids = tuple((r[0], int(r[1])) for r in conn.execute(_TYPE_OIDS, (regclass,)).fetchall())
    encoding = pg2pyenc(conn.execute("SHOW server_encoding").fetchone()[0].encode())
    return CapturedTable(schema, name, tuple(columns), tuple(chosen), "full" if setting == "f" else "key",
                         tuple(identity_key), oids, encoding, int(exists))


def narrow_identity(table: str, keys, logged, then: str = "start the job again") -> str:
    """Why a table whose UPDATE and DELETE log only ``logged`` of the old row cannot be applied by
    ``keys`` (every column, when empty), and the way out, ending with ``then``."""
    applied = f"by key {list(keys)}" if keys else "by every column (it has no key)"
    among = f", or set primaryKeys in table-names-config to columns among {list(logged)}," if logged else ""
    return (f"table {table} is applied {applied}, but its replica identity logs only {list(logged)} of a row "
            "an UPDATE or DELETE changes: a DELETE would reach the target without its key and delete "
            "nothing, and an UPDATE of the key would leave the old row behind. Run ALTER TABLE "
            f"{table} REPLICA IDENTITY FULL{among} and {then}")


# A type as pgoutput names it (atttypid, atttypmod), with its base type as _COLUMNS finds it.
_TYPE = """
WITH RECURSIVE chain(oid, typmod, depth) AS (
    SELECT %(oid)s::oid, %(typmod)s::int, 0
    UNION ALL
    SELECT t.typbasetype, t.typtypmod, chain.depth + 1 FROM chain JOIN pg_type t ON t.oid = chain.oid
    WHERE t.typtype = 'd')
SELECT oid, typmod, format_type(%(oid)s::oid, %(typmod)s::int), format_type(oid, typmod) FROM chain
ORDER BY depth DESC LIMIT 1"""


def _columns(conn, table: str, described: list[tuple], regclass: str | None = None) -> list[TableColumn]:
    """(name, base oid, base typmod, its type's text, the base type's text, atttypid, atttypmod,
    attnum) rows; ``regclass``: the table, whose catalog gives each column's NOT NULL and DEFAULT."""
    types = lookup(conn, [row[1] for row in described])
    defined = {} if regclass is None else {int(r[0]): (bool(r[1]), default_of(r[2]))
                                           for r in conn.execute(_DEFINITIONS, (regclass,)).fetchall()}
    columns = []
    for column, oid, typmod, sql_type, base_type, type_oid, type_mod, attnum in described:
        try:
            columns.append(TableColumn(column, types[oid].name, sql_type, seatunnel_type(types[oid], typmod),
                                       base_type if is_portable(types[oid]) else None, int(type_oid), int(type_mod),
                                       attnum=None if attnum is None else int(attnum),
                                       **_defined(defined.get(None if attnum is None else int(attnum)))))
        except UnsupportedType as exc:
            raise TableError(f"column {table}.{column}: {exc}; leave the table out or "
                             "change the column's type") from None
    return columns


def columns_of_relation(conn, table: str, relation: list[list], ids: list | None = None,
                        regclass: str | None = None) -> list[TableColumn]:
    """The columns a Relation message names ([name, type oid, typmod] each), described as
    ``describe`` describes a table's: what a table looks like at that point of the stream.
    ``ids``: their attnums (shapes.relation_ids), where known; their NOT NULL and DEFAULT are the
    catalog's (``regclass``), as of now: the stream has neither."""
    described = []
    for (name, oid, typmod), attnum in zip(relation, ids or [None] * len(relation)):
        base_oid, base_mod, sql_type, base_type = conn.execute(_TYPE, {"oid": oid, "typmod": typmod}).fetchone()
        described.append((name, base_oid, base_mod, sql_type, base_type, oid, typmod, attnum))
    return _columns(conn, table, described, regclass if ids else None)


_DEFINITIONS = """
SELECT a.attnum, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped"""
_QUOTED = re.compile(r"'((?:[^']|'')*)'(?:::[\w\s\".\[\]()]+)?")
_NOW = re.compile(r"(now\(\)|current_timestamp(\(\d+\))?|transaction_timestamp\(\)|localtimestamp(\(\d+\))?)"
                  r"(::[\w\s]+)?", re.I)
_NUMBER = re.compile(r"\(?-?\d+(\.\d+)?(e[-+]?\d+)?\)?(::[\w\s]+)?", re.I)


def default_of(expression: str | None) -> list | None:
    """A column's default as pg_get_expr writes it, as plugin/types.py's SOURCE_DEFAULT: a sequence's
    nextval(...) is none (the target has no such sequence; identity and serial columns are keys)."""
    if expression is None or expression.lower().startswith("nextval("):
        return None
    quoted = _QUOTED.fullmatch(expression)
    if quoted:
        return ["literal", quoted.group(1).replace("''", "'")]
    if _NOW.fullmatch(expression):
        return ["now", None]
    if _NUMBER.fullmatch(expression):
        return ["literal", re.sub(r"::.*|[()]", "", expression)]
    if expression.lower() in ("true", "false"):
        return ["literal", "1" if expression.lower() == "true" else "0"]     # 1/0: either database's boolean
    return None if expression.upper() == "NULL" else ["expression", expression]


def _defined(found: tuple | None) -> dict:
    return {} if found is None else {"not_null": found[0], "default": found[1]}


def _key_row(table: CapturedTable) -> sql.Composable:
    return sql.SQL("ROW({})").format(sql.SQL(", ").join(sql.Identifier(k) for k in table.keys))


def _key_literal(table: CapturedTable, values: list[str]) -> sql.Composable:
    types = {c.name: c.sql_type for c in table.columns}
    return sql.SQL("ROW({})").format(sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Literal(v), sql.SQL(types[k])) for k, v in zip(table.keys, values)))


def next_boundary(conn, table: CapturedTable, after: list[str] | None, size: int) -> list[str] | None:
    """The key of the ``size``-th row after ``after``; None when fewer rows remain (last page)."""
    if not table.keys:
        return None
    where = sql.SQL("WHERE {} > {}").format(_key_row(table), _key_literal(table, after)) if after else sql.SQL("")
    query = sql.SQL("SELECT {} FROM {} {} ORDER BY {} OFFSET {} LIMIT 1").format(
        sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(k)) for k in table.keys),
        table.ident(), where, sql.SQL(", ").join(sql.Identifier(k) for k in table.keys), sql.Literal(size - 1))
    row = conn.execute(query).fetchone()
    return list(row) if row else None


def page_query(table: CapturedTable, after: list[str] | None, upto: list[str] | None) -> sql.Composable:
    """Every column as text, for the rows of one snapshot split."""
    conditions = []
    if after:
        conditions.append(sql.SQL("{} > {}").format(_key_row(table), _key_literal(table, after)))
    if upto:
        conditions.append(sql.SQL("{} <= {}").format(_key_row(table), _key_literal(table, upto)))
    where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("")
    return sql.SQL("SELECT {} FROM {}{}").format(
        sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c.name)) for c in table.columns),
        table.ident(), where)
