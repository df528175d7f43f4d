"""A source's declared schema: SeaTunnel's ``schema { ... }`` block, parsed once for every plugin.

Two forms are accepted, as in SeaTunnel's ``concept/schema-feature.md``::

    schema { fields { id = bigint, name = string } }                  # the short form
    schema {
      table = "db.orders"
      columns = [{ name = id, type = bigint, nullable = false, defaultValue = 0, comment = "key" }]
      primaryKey { name = pk_orders, columnNames = [id] }
      constraintKeys = [{ constraintName = uk_name, constraintType = UNIQUE_KEY,
                          constraintColumns = [{ columnName = name, sortType = ASC }] }]
    }

A plugin declares ``schema_options()`` among its options (so unknown keys inside ``schema``
are reported like any other option) and builds a ``Schema`` with ``read_schema(opts)``. The
``Schema`` carries the Spark row type plus what sinks may need: the table name, the primary
key and the constraint keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql import types as T

from seatide.plugin.options import BOOL, LIST, OBJECT, STRING, KeyCheck, Option, OptionError, Options
from seatide.plugin.types import SchemaError, parse_row, parse_type

CONSTRAINT_TYPES = ("INDEX_KEY", "UNIQUE_KEY", "KEY")
SORT_TYPES = ("ASC", "DESC")


@dataclass(frozen=True)
class Column:
    """One column of ``schema.columns``; ``default`` is the value as written (None: no default)."""

    name: str
    data_type: T.DataType
    nullable: bool = True
    default: Any = None
    comment: str | None = None
    length: int = 0
    scale: int | None = None


@dataclass(frozen=True)
class PrimaryKey:
    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ConstraintKey:
    name: str
    kind: str                                   # INDEX_KEY, UNIQUE_KEY or KEY
    columns: tuple[tuple[str, str], ...]        # (column, ASC | DESC)


@dataclass(frozen=True)
class OldRowColumns:
    """What a change source sends of a row's old values on a DELETE or UPDATE_BEFORE when it sends
    only some columns (the others arrive NULL): a sink applying changes by a key outside
    ``columns`` would match nothing. ``widen``: how to make the source send every column."""

    columns: tuple[str, ...]
    widen: str


@dataclass(frozen=True)
class Schema:
    """A declared schema. ``struct`` is what Spark reads; the rest is carried for sinks."""

    columns: tuple[Column, ...]
    table: str | None = None
    comment: str | None = None
    schema_first: bool = False
    primary_key: PrimaryKey | None = None
    constraint_keys: tuple[ConstraintKey, ...] = ()
    old_row: OldRowColumns | None = None        # None: deleted and updated rows arrive whole

    @property
    def struct(self) -> T.StructType:
        # Comments and defaults stay on ``columns``: Spark compares metadata in StructType
        # equality, and a type check should not fail over a comment.
        return T.StructType([T.StructField(c.name, c.data_type, c.nullable) for c in self.columns])

    @property
    def table_path(self) -> tuple[str | None, str | None, str]:
        """(database, schema, table) of ``table``; ``schema_first`` reads ``a.b`` as schema.table."""
        parts = (self.table or "").split(".")
        if len(parts) >= 3:
            return parts[-3], parts[-2], parts[-1]
        if len(parts) == 2:
            return (None, parts[0], parts[1]) if self.schema_first else (parts[0], None, parts[1])
        return None, None, parts[0]


def schema_options(prefix: str = "schema") -> tuple[Option, ...]:
    """The option declarations of a ``schema`` block (give one of fields and columns)."""
    return (
        Option(f"{prefix}.fields", OBJECT, None,
               "the row type: fields { id = bigint, price = \"decimal(10, 2)\", tags = \"array<string>\", "
               "point { x = double } } (see docs/types.md)"),
        Option(f"{prefix}.columns", LIST, None,
               "the row type as columns: [{ name, type, nullable = true, defaultValue, comment, "
               "columnLength, columnScale }]"),
        Option(f"{prefix}.table", STRING, None, "table name: database.schema.table, database.table or table"),
        Option(f"{prefix}.schema_first", BOOL, False, "read a two-part table name as schema.table"),
        Option(f"{prefix}.comment", STRING, None, "comment of the table"),
        Option(f"{prefix}.primaryKey", OBJECT, None, "primaryKey { name = pk, columnNames = [id] }"),
        Option(f"{prefix}.constraintKeys", LIST, None,
               "[{ constraintName, constraintType = KEY, constraintColumns = [{ columnName, sortType }] }]"),
    )


def read_schema(opts: Options, prefix: str = "schema", check_keys: KeyCheck | None = None) -> Schema | None:
    """The ``Schema`` the options declare, None if neither fields nor columns is given.

    Raises ``OptionError`` naming the option at fault; unknown keys of a column go to
    ``check_keys`` (``plugin.options.KeyCheck``), by default ignored as SeaTunnel does.
    """
    fields, columns = opts[f"{prefix}.fields"], opts[f"{prefix}.columns"]
    if fields is not None and columns is not None:
        raise OptionError(f"{prefix}.columns", f"give {prefix}.fields or {prefix}.columns, not both")
    if fields is None and columns is None:
        return None
    if fields is not None:
        try:
            struct = parse_row(fields)
        except SchemaError as exc:
            raise OptionError(f"{prefix}.fields", f"{prefix}.fields: {exc}") from None
        parsed = tuple(Column(f.name, f.dataType) for f in struct.fields)
    else:
        keys = check_keys or KeyCheck()
        parsed = tuple(_column(c, f"{prefix}.columns[{i}]", keys) for i, c in enumerate(columns))
    if not parsed:
        raise OptionError(f"{prefix}.{'fields' if fields is not None else 'columns'}",
                          f"the schema has no fields: declare at least one, e.g. {prefix}.fields {{ id = bigint }}")
    names = [c.name for c in parsed]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise OptionError(f"{prefix}.columns", f"column '{duplicate}' is declared twice")
    key = _primary_key(opts[f"{prefix}.primaryKey"], names, f"{prefix}.primaryKey")
    constraints = tuple(_constraint(c, names, f"{prefix}.constraintKeys[{i}]")
                        for i, c in enumerate(opts[f"{prefix}.constraintKeys"] or []))
    return Schema(parsed, opts[f"{prefix}.table"], opts[f"{prefix}.comment"], opts[f"{prefix}.schema_first"],
                  key, constraints)


def _column(raw: Any, where: str, keys: KeyCheck) -> Column:
    if not isinstance(raw, Mapping):
        raise OptionError(where, f"{where} must be an object {{ name = id, type = bigint }}")
    for key in ("name", "type"):
        if raw.get(key) is None:
            raise OptionError(where, f"{where} needs '{key}' (a column is {{ name = id, type = bigint }})")
    keys(raw, ("name", "type", "nullable", "defaultValue", "comment", "columnLength", "columnScale"), where)
    try:
        data_type = parse_type(raw["type"])
    except SchemaError as exc:
        raise OptionError(where, f"{where}.type: {exc}") from None
    nullable = raw.get("nullable", True)
    if not isinstance(nullable, bool):
        raise OptionError(where, f"{where}.nullable must be true or false, got {nullable!r}")
    length, scale = raw.get("columnLength", 0), raw.get("columnScale")
    for key, value in (("columnLength", length), ("columnScale", scale)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise OptionError(where, f"{where}.{key} must be a whole number >= 0, got {value!r}")
    comment = raw.get("comment")
    return Column(str(raw["name"]), data_type, nullable, raw.get("defaultValue"),
                  None if comment is None else str(comment), length, scale)


def _names(raw: Any, where: str, known: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise OptionError(where, f"{where} must list at least one column, e.g. [id]")
    missing = [str(n) for n in raw if str(n) not in known]
    if missing:
        raise OptionError(where, f"{where} names '{missing[0]}', which is not a column "
                          f"(columns: {', '.join(known)})")
    return tuple(str(n) for n in raw)


def _primary_key(raw: Mapping | None, known: list[str], where: str) -> PrimaryKey | None:
    if raw is None:
        return None
    # The doc's table says ``columns``; its example says ``columnNames``: accept both.
    columns = raw.get("columnNames", raw.get("columns"))
    if raw.get("name") is None or columns is None:
        raise OptionError(where, f"{where} needs name and columnNames: {{ name = pk, columnNames = [id] }}")
    return PrimaryKey(str(raw["name"]), _names(columns, f"{where}.columnNames", known))


def _constraint(raw: Any, known: list[str], where: str) -> ConstraintKey:
    if not isinstance(raw, Mapping) or raw.get("constraintName") is None or raw.get("constraintColumns") is None:
        raise OptionError(where, f"{where} needs constraintName and constraintColumns = "
                          "[{ columnName = id, sortType = ASC }]")
    kind = str(raw.get("constraintType", "KEY")).upper()
    if kind not in CONSTRAINT_TYPES:
        raise OptionError(where, f"{where}.constraintType '{raw['constraintType']}' is not one of "
                          f"{', '.join(CONSTRAINT_TYPES)}")
    columns = []
    for j, column in enumerate(raw["constraintColumns"] if isinstance(raw["constraintColumns"], list) else [None]):
        at = f"{where}.constraintColumns[{j}]"
        if isinstance(column, str):
            column = {"columnName": column}
        if not isinstance(column, Mapping) or column.get("columnName") is None:
            raise OptionError(at, f"{at} must be {{ columnName = id, sortType = ASC }}")
        sort = str(column.get("sortType", "ASC")).upper()
        if sort not in SORT_TYPES:
            raise OptionError(at, f"{at}.sortType must be ASC or DESC, got '{column['sortType']}'")
        columns.append((_names([column["columnName"]], f"{at}.columnName", known)[0], sort))
    return ConstraintKey(str(raw["constraintName"]), kind, tuple(columns))


__all__ = ["Column", "ConstraintKey", "OldRowColumns", "PrimaryKey", "Schema", "read_schema", "schema_options"]
