"""What differs between PostgreSQL and MySQL/MariaDB for the Jdbc sink.

Quoting, column types for tables created from the input schema (the type tables of
SeaTunnel's PostgreSql and Mysql pages, read from SeaTunnel type to column), the URL
Spark's JDBC writer gets, and the set-wise statements that apply one staged batch to the
target: ``INSERT ... SELECT`` for plain inserts, and for keyed changes the net change per
key, decided by its last change (``ROW_NUMBER() OVER (PARTITION BY key ORDER BY seq DESC)``):
a key whose last change is INSERT or UPDATE_AFTER ends with that row (upserted with the
dialect's own statement, or without upserts updated where the target has the key and
inserted where it has not); one whose last change is DELETE or UPDATE_BEFORE ends without a
row (deleted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import types as T

from seatide.connectors.jdbc import task_tries
from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL, JdbcUrl
from seatide.plugin.rowkind import RowKind
from seatide.plugin.types import SOURCE_DIALECT, SOURCE_TYPE, declared_type, type_name

# Columns a keyed sink's staging rows carry besides the input's own (see targets.py).
STAGE_KIND = "__seatide_kind"    # RowKind value
STAGE_SEQ = "__seatide_seq"      # order of changes within the batch (later wins per key)
# Which column set a staged row has, where the routes writing one target stage different columns
# (target_table.py): a row is applied with its own columns only, so one without a column leaves
# the target's default or value there instead of NULL.
STAGE_GROUP = "__seatide_group"
# MySQL/MariaDB's staging tables, where Spark runs each task once: like PostgreSQL's UNLOGGED
# ones, they need neither crash safety nor rollback (a failed batch is staged again, into a new
# table), and without InnoDB's redo and undo logs the server spends ~45% less CPU staging a
# batch and ~30% less reading it back in the apply (20 tables x 20,000 rows, MariaDB 10.11).
# Not where Spark may run a task twice: a retried task's rows would stay beside its first try's.
STAGE_ENGINE = "MyISAM"
# A key's last change in a batch decides its row: these kinds leave one, those remove it.
_KEEPS_ROW = f"({int(RowKind.INSERT)}, {int(RowKind.UPDATE_AFTER)})"
_REMOVES_ROW = f"({int(RowKind.UPDATE_BEFORE)}, {int(RowKind.DELETE)})"


# Declared types that cannot be a primary key: PostgreSQL's without a btree operator class,
# MySQL's that would need a prefix length
_PG_UNKEYABLE = frozenset({"json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle"})
_MYSQL_UNKEYABLE = frozenset({"tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob",
                              "longblob", "json", "geometry", "point", "linestring", "polygon", "multipoint",
                              "multilinestring", "multipolygon", "geometrycollection"})
# char(n) / varchar(n) as either database declares it, and the longest VARCHAR an utf8mb4 MySQL row takes
_SIZED_STRING = re.compile(r"(character varying|varchar|nvarchar|character|char|nchar)\s*\(\s*(\d+)\s*\)")
_MYSQL_VARCHAR_MAX = 16383
# How a timestamp inside an array is written into a MySQL JSON column
_JSON_TIMESTAMP = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"


class UnsupportedType(ValueError):
    """A field whose type the dialect has no column type for."""


@dataclass(frozen=True)
class Dialect:
    name: str   # POSTGRESQL or MYSQL

    # -- names -------------------------------------------------------------------------
    def quote(self, name: str) -> str:
        if self.name == MYSQL:
            return "`" + name.replace("`", "``") + "`"
        return '"' + name.replace('"', '""') + '"'

    def qualified(self, parts: tuple[str, ...]) -> str:
        return ".".join(self.quote(p) for p in parts)

    # -- types ---------------------------------------------------------------------------
    def column_type(self, data_type: T.DataType, key: bool = False, name: str = "field") -> str:
        """Column type for a field (``name``) of the input; ``key``: part of the primary key."""
        mapped = (_pg_type if self.name == POSTGRESQL else _mysql_type)(data_type, key)
        if mapped is None:
            way_out = (f"give it a type, e.g. CAST({name} AS string) in a Sql transform"
                       if isinstance(data_type, T.NullType) else
                       f"write it as JSON text, e.g. to_json({name}) in a Sql transform")
            raise UnsupportedType(f"{type_name(data_type)} has no {self.label} column type in SeaTide; {way_out}, "
                                  "or create the table yourself")
        return mapped

    def field_type(self, field: T.StructField, key: bool = False) -> str:
        """Column type for ``field``: the column type it was read from when that was a column of
        this kind of database (SeaTunnel keeps a column's source type the same way), else the
        mapping of its SeaTunnel type."""
        declared = declared_type(field, self.name)
        if declared and (not key or self._keyable(declared)):
            return declared
        carried = self._string_of_length(field)
        if carried:
            return carried
        try:
            return self.column_type(field.dataType, key, field.name)
        except UnsupportedType as exc:
            raise UnsupportedType(f"field '{field.name}': {exc}") from None

    def _string_of_length(self, field: T.StructField) -> str | None:
        """A string read from a char(n)/varchar(n) column of the other kind of database keeps its
        length (SeaTunnel's catalog carries a column's length across databases): VARCHAR(n) where
        this database's column can hold that length. A char(n) too: the two databases disagree on
        its trailing spaces (PostgreSQL keeps them, MySQL drops them), a VARCHAR keeps the value."""
        metadata = field.metadata or {}
        if not isinstance(field.dataType, T.StringType) or metadata.get(SOURCE_DIALECT) in (None, self.name):
            return None
        match = _SIZED_STRING.fullmatch(str(metadata.get(SOURCE_TYPE, "")).strip().lower())
        if not match or (self.name == MYSQL and int(match.group(2)) > _MYSQL_VARCHAR_MAX):
            return None
        return f"VARCHAR({int(match.group(2))})"

    def _keyable(self, declared: str) -> bool:
        """Whether a column of the declared type can be (part of) a primary key; one that cannot
        takes SeaTunnel's mapping in a created key (a string becomes TEXT / VARCHAR(255))."""
        base = declared.split("(")[0].strip().lower().removesuffix("[]")
        return base not in (_PG_UNKEYABLE if self.name == POSTGRESQL else _MYSQL_UNKEYABLE)

    @property
    def label(self) -> str:
        return "PostgreSQL" if self.name == POSTGRESQL else "MySQL/MariaDB"

    def create_table(self, table: tuple[str, ...], schema: T.StructType, keys: list[str],
                     with_key: bool = True) -> str:
        columns = [f"{self.quote(f.name)} {self.field_type(f, f.name in keys)}"
                   + (" NOT NULL" if f.name in keys and with_key else "")
                   for f in schema.fields]
        if keys and with_key:
            columns.append(f"PRIMARY KEY ({', '.join(self.quote(k) for k in keys)})")
        return f"CREATE TABLE {self.qualified(table)} ({', '.join(columns)})"

    def staged_value(self, column, data_type: T.DataType):
        """What Spark's JDBC writer stages for a field (a Spark Column). MySQL has no array
        columns: an array goes as its JSON text (into the JSON column ``column_type`` gives).
        PostgreSQL's driver cannot send an array of byte strings: it goes as the array's text
        (``{"\\x0102",NULL}``), which the untyped string parameter (``sink_session.spark_write``)
        lets the server read as bytea[]."""
        from pyspark.sql import functions as F

        if not isinstance(data_type, T.ArrayType):
            return column
        if self.name == MYSQL:   # every microsecond of a timestamp (Spark's default keeps milliseconds)
            return F.to_json(column, {"timestampFormat": _JSON_TIMESTAMP, "timestampNTZFormat": _JSON_TIMESTAMP})
        if isinstance(data_type.elementType, T.BinaryType):
            element = lambda x: F.when(x.isNull(), F.lit("NULL")).otherwise(  # noqa: E731
                F.concat(F.lit('"\\\\x'), F.lower(F.hex(x)), F.lit('"')))
            return F.concat(F.lit("{"), F.array_join(F.transform(column, element), ","), F.lit("}"))
        return column

    def create_stage(self, stage: tuple[str, ...], columns_from: str, changes: bool, temporary: bool = False,
                     engine: str | None = None, grouped: bool = False, tried: bool = False) -> str:
        """A staging table with the target's column types (``columns_from`` selects none of its rows).
        ``temporary``: one of the connection's own, made inside the batch's transaction and gone
        with it (PostgreSQL: dropped at COMMIT or ROLLBACK; MySQL: a TEMPORARY table, whose
        CREATE does not commit the transaction, gone when the connection closes). ``engine``:
        MySQL's storage engine for the table (``STAGE_ENGINE``), else the server's default.
        ``grouped``: with a ``STAGE_GROUP`` column; ``tried``: with the task try's columns."""
        extra = [f"{self.quote(STAGE_KIND)} SMALLINT", f"{self.quote(STAGE_SEQ)} BIGINT"] if changes else []
        extra += [f"{self.quote(STAGE_GROUP)} SMALLINT"] if grouped else []
        extra += task_tries.try_columns(self.name, self.quote) if tried else []
        if self.name == POSTGRESQL:
            # UNLOGGED: staged rows need no crash safety (a crashed batch is staged again) and
            # skipping the WAL makes the extra copy cheap.
            kind = "TEMP" if temporary else "UNLOGGED"
            on_commit = " ON COMMIT DROP" if temporary else ""
            create = f"CREATE {kind} TABLE {self.qualified(stage)}{on_commit} AS {columns_from} WITH NO DATA"
            return create + "".join(f"; ALTER TABLE {self.qualified(stage)} ADD COLUMN {c}" for c in extra)
        kind = "TEMPORARY TABLE" if temporary else "TABLE"
        options = f"ENGINE={engine} " if engine else ""
        return (f"CREATE {kind} {self.qualified(stage)} {'(' + ', '.join(extra) + ') ' if extra else ''}{options}"
                f"AS {columns_from}")

    def create_stage_for(self, stage: tuple[str, ...], schema: T.StructType, query=None, engine: str | None = None,
                         tried: bool = False) -> str:
        """A staging table for ``query`` mode (an ``InsertQuery``), where no target table gives
        the column types. PostgreSQL casts nothing on its own from a staged text into a json,
        inet or geometry column, so a field the statement inserts as a whole ``?`` into a named
        column is staged in that column's own type; the others in their SeaTunnel type's column."""
        targets = query.marker_columns() if query is not None and self.name == POSTGRESQL else None
        if targets is None:
            columns = [f"{self.quote(f.name)} {self.column_type(f.dataType, name=f.name)}" for f in schema.fields]
            columns += task_tries.try_columns(self.name, self.quote) if tried else []
            unlogged = "UNLOGGED " if self.name == POSTGRESQL else ""
            options = f" ENGINE={engine}" if engine and self.name == MYSQL else ""
            return f"CREATE {unlogged}TABLE {self.qualified(stage)} ({', '.join(columns)}){options}"
        table, filled = targets
        columns = [f"t.{filled[i]} AS {self.quote(f.name)}" if i in filled
                   else f"CAST(NULL AS {self.column_type(f.dataType, name=f.name)}) AS {self.quote(f.name)}"
                   for i, f in enumerate(schema.fields)]
        added = "".join(f"; ALTER TABLE {self.qualified(stage)} ADD COLUMN {c}" for c in task_tries.try_columns(self.name, self.quote)) \
            if tried else ""
        return (f"CREATE UNLOGGED TABLE {self.qualified(stage)} AS SELECT {', '.join(columns)} FROM {table} t WITH NO "
                f"DATA{added}")

    # -- applying a staged batch -----------------------------------------------------------
    # ``group``: apply only the rows of that ``STAGE_GROUP`` (None: every row), each key's last
    # change still chosen among all the rows.
    # ``one_try``: only one task try's rows of each partition (task_tries.py).
    def insert_staged(self, target: str, stage: str, columns: list[str], group: int | None = None,
                      one_try: bool = False) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        conditions = ([] if group is None else [f"{self.quote(STAGE_GROUP)} = {int(group)}"]) + \
            ([task_tries.one_try(self.quote, stage)] if one_try else [])
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {stage}{where}"


    def last_changes(self, stage: str, columns: list[str], keys: list[str], group: int | None = None) -> str:
        """Per key, the batch's changes ranked last first (``seatide_rank = 1``: the last one).

        UPDATE_BEFORE rows are ranked too: when one is a key's last change, the key's row was
        moved to another key (``UPDATE t SET id = 500 WHERE id = 7``), so the key is deleted.
        """
        cols = ", ".join(self.quote(c) for c in columns)
        partition = ", ".join(self.quote(k) for k in keys)
        grouped = "" if group is None else f", {self.quote(STAGE_GROUP)} AS seatide_group"
        return (f"SELECT {cols}, {self.quote(STAGE_KIND)} AS seatide_kind{grouped}, ROW_NUMBER() OVER "
                f"(PARTITION BY {partition} ORDER BY {self.quote(STAGE_SEQ)} DESC) AS seatide_rank "
                f"FROM {stage}")

    def _chosen(self, keeps: bool, group: int | None, alias: str = "") -> str:
        """The rows a statement applies: each key's last change, of the kinds that keep (or remove) a row."""
        kinds = _KEEPS_ROW if keeps else _REMOVES_ROW
        grouped = "" if group is None else f" AND {alias}seatide_group = {int(group)}"
        return f"{alias}seatide_rank = 1 AND {alias}seatide_kind IN {kinds}{grouped}"

    def upsert_staged(self, target: str, stage: str, columns: list[str], keys: list[str],
                      group: int | None = None) -> str:
        """Insert-or-update the keys whose last change leaves a row (INSERT or UPDATE_AFTER)."""
        cols = ", ".join(self.quote(c) for c in columns)
        chosen = (f"INSERT INTO {target} ({cols}) SELECT {cols} FROM "
                  f"({self.last_changes(stage, columns, keys, group)}) seatide_last WHERE {self._chosen(True, group)}")
        others = [c for c in columns if c not in keys]
        if self.name == POSTGRESQL:
            conflict = ", ".join(self.quote(k) for k in keys)
            if not others:
                return f"{chosen} ON CONFLICT ({conflict}) DO NOTHING"
            sets = ", ".join(f"{self.quote(c)} = EXCLUDED.{self.quote(c)}" for c in others)
            return f"{chosen} ON CONFLICT ({conflict}) DO UPDATE SET {sets}"
        sets = ", ".join(f"{self.quote(c)} = VALUES({self.quote(c)})" for c in (others or keys[:1]))
        return f"{chosen} ON DUPLICATE KEY UPDATE {sets}"

    def update_last(self, target: str, stage: str, columns: list[str], keys: list[str],
                    group: int | None = None) -> str:
        """Plain UPDATE of the rows whose key's last change leaves a row (enable_upsert = false)."""
        others = [c for c in columns if c not in keys] or keys[:1]
        last = f"({self.last_changes(stage, columns, keys, group)}) s"
        match = self._match(keys)
        if self.name == POSTGRESQL:
            sets = ", ".join(f"{self.quote(c)} = s.{self.quote(c)}" for c in others)
            return f"UPDATE {target} t SET {sets} FROM {last} WHERE {self._chosen(True, group, 's.')} AND {match}"
        sets = ", ".join(f"t.{self.quote(c)} = s.{self.quote(c)}" for c in others)
        return f"UPDATE {target} t JOIN {last} ON {match} SET {sets} WHERE {self._chosen(True, group, 's.')}"

    def insert_missing(self, target: str, stage: str, columns: list[str], keys: list[str],
                       group: int | None = None) -> str:
        """Plain INSERT of the keys whose last change leaves a row and that the target does not
        have (enable_upsert = false; run after ``update_last``, which covered the others)."""
        cols = ", ".join(self.quote(c) for c in columns)
        return (f"INSERT INTO {target} ({cols}) SELECT {', '.join('s.' + self.quote(c) for c in columns)} "
                f"FROM ({self.last_changes(stage, columns, keys, group)}) s WHERE {self._chosen(True, group, 's.')} "
                f"AND NOT EXISTS (SELECT 1 FROM {target} t WHERE {self._match(keys)})")

    def delete_staged(self, target: str, stage: str, columns: list[str], keys: list[str]) -> str:
        """Delete the keys whose last change removes their row (DELETE, or UPDATE_BEFORE of a key change)."""
        last = f"({self.last_changes(stage, columns, keys)}) s"
        match = self._match(keys)
        if self.name == POSTGRESQL:
            return f"DELETE FROM {target} t USING {last} WHERE {self._chosen(False, None, 's.')} AND {match}"
        return f"DELETE t FROM {target} t JOIN {last} ON {match} WHERE {self._chosen(False, None, 's.')}"

    def _match(self, keys: list[str]) -> str:
        return " AND ".join(f"t.{self.quote(k)} = s.{self.quote(k)}" for k in keys)

    # -- catalog -----------------------------------------------------------------------------
    def table_exists(self, cursor, table: tuple[str, ...]) -> bool:
        cursor.execute("SELECT 1 FROM information_schema.tables WHERE " + self._where_table(table), table[::-1])
        return cursor.fetchone() is not None

    def retype(self, target: str, column: str, column_type: str) -> str:
        """The statement that gives ``column`` of ``target`` another type, converting its values."""
        if self.name == MYSQL:
            return f"ALTER TABLE {target} MODIFY COLUMN {self.quote(column)} {column_type}"
        return (f"ALTER TABLE {target} ALTER COLUMN {self.quote(column)} TYPE {column_type} "
                f"USING {self.quote(column)}::{column_type}")

    def column_default(self, default: list, dialect: str | None, column_type: str = "") -> str | None:
        """A source column's DEFAULT (plugin/types.py's SOURCE_DEFAULT) read from a ``dialect``
        database, as this database writes it; None where it has no form here (an expression of
        the other database)."""
        kind, value = default
        if kind == "literal":
            text = str(value).replace("'", "''")
            return "'" + (text.replace("\\", "\\\\") if self.name == MYSQL else text) + "'"
        if kind == "now":     # MySQL wants the column's own fractional digits
            digits = re.search(r"\((\d+)\)", column_type) if self.name == MYSQL else None
            return "CURRENT_TIMESTAMP" + (f"({digits.group(1)})" if digits and digits.group(1) != "0" else "")
        return str(value) if dialect == self.name and kind == "expression" else None

    def nullable(self, target: str, column: str, column_type: str) -> str:
        """The statement that lets ``column`` of ``target`` (of ``column_type``) take NULL."""
        if self.name == MYSQL:
            return f"ALTER TABLE {target} MODIFY COLUMN {self.quote(column)} {column_type} NULL"
        return f"ALTER TABLE {target} ALTER COLUMN {self.quote(column)} DROP NOT NULL"

    def create_schema(self, cursor, name: str) -> None:
        """Create the schema (PostgreSQL) or database (MySQL) ``name`` unless it exists."""
        cursor.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (name,))
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE {'DATABASE' if self.name == MYSQL else 'SCHEMA'} {self.quote(name)}")

    def columns(self, cursor, table: tuple[str, ...]) -> list[str]:
        cursor.execute("SELECT column_name FROM information_schema.columns WHERE " + self._where_table(table)
                       + " ORDER BY ordinal_position", table[::-1])
        return [row[0] for row in cursor.fetchall()]

    def nullability(self, cursor, table: tuple[str, ...]) -> dict[str, str | None]:
        """The table's columns, each with its type where it is NOT NULL, else None."""
        declared = "column_type" if self.name == MYSQL else "data_type"
        cursor.execute(f"SELECT column_name, is_nullable, {declared} FROM information_schema.columns WHERE "
                       + self._where_table(table) + " ORDER BY ordinal_position", table[::-1])
        return {row[0]: (row[2] if row[1] == "NO" else None) for row in cursor.fetchall()}

    def unique_keys(self, cursor, table: tuple[str, ...]) -> list[frozenset[str]]:
        """Column sets of the table's primary key and unique indexes (what an upsert can match on)."""
        if self.name == POSTGRESQL:
            cursor.execute("SELECT i.indexrelid, a.attname FROM pg_index i JOIN pg_attribute a ON "
                           "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                           "WHERE i.indrelid = to_regclass(%s) AND i.indisunique", (self.qualified(table),))
        else:
            cursor.execute("SELECT index_name, column_name FROM information_schema.statistics WHERE non_unique = 0 "
                           "AND " + self._where_table(table), table[::-1])
        found: dict = {}
        for index, column in cursor.fetchall():
            found.setdefault(index, set()).add(column)
        return [frozenset(columns) for columns in found.values()]

    def _where_table(self, table: tuple[str, ...]) -> str:
        current = "current_schema()" if self.name == POSTGRESQL else "DATABASE()"
        return "table_name = %s AND table_schema = " + ("%s" if len(table) > 1 else current)


def _pg_type(t: T.DataType, key: bool) -> str | None:
    simple = {T.BooleanType: "BOOLEAN", T.ByteType: "SMALLINT", T.ShortType: "SMALLINT",
              T.IntegerType: "INTEGER", T.LongType: "BIGINT", T.FloatType: "REAL",
              T.DoubleType: "DOUBLE PRECISION", T.StringType: "TEXT", T.BinaryType: "BYTEA",
              T.DateType: "DATE", T.TimestampNTZType: "TIMESTAMP", T.TimestampType: "TIMESTAMPTZ"}
    for cls, name in simple.items():
        if isinstance(t, cls):
            return name
    if isinstance(t, T.DecimalType):
        return f"NUMERIC({t.precision},{t.scale})"
    if type(t).__name__ == "TimeType":
        return "TIME"
    if isinstance(t, T.ArrayType) and not isinstance(t.elementType, (T.ArrayType, T.MapType, T.StructType)):
        inner = _pg_type(t.elementType, False)
        return f"{inner}[]" if inner else None
    return None


def _mysql_type(t: T.DataType, key: bool) -> str | None:
    # TEXT and BLOB columns cannot be (part of) a primary key without a prefix length.
    simple = {T.BooleanType: "BOOLEAN", T.ByteType: "TINYINT", T.ShortType: "SMALLINT",
              T.IntegerType: "INT", T.LongType: "BIGINT", T.FloatType: "FLOAT", T.DoubleType: "DOUBLE",
              T.StringType: "VARCHAR(255)" if key else "LONGTEXT",
              T.BinaryType: "VARBINARY(255)" if key else "LONGBLOB",
              T.DateType: "DATE", T.TimestampNTZType: "DATETIME(6)", T.TimestampType: "DATETIME(6)"}
    for cls, name in simple.items():
        if isinstance(t, cls):
            return name
    if isinstance(t, T.DecimalType):
        return f"DECIMAL({t.precision},{t.scale})"
    if type(t).__name__ == "TimeType":
        return "TIME(6)"
    if isinstance(t, T.ArrayType) and _mysql_type(t.elementType, False) is not None:
        return "JSON"       # staged as its JSON text (Dialect.staged_value)
    return None


def dialect_of(url: JdbcUrl) -> Dialect:
    return Dialect(url.dialect)


__all__ = ["Dialect", "STAGE_GROUP", "STAGE_KIND", "STAGE_SEQ", "UnsupportedType",
           "dialect_of"]
