"""SeaTunnel type names -> Spark types.

The grammar (SeaTunnel's ``concept/schema-feature.md``), case-insensitive, spaces anywhere
between tokens::

    type    := simple | decimal | array | map | row
    simple  := string | boolean | tinyint | smallint | int | bigint | float | double
             | bytes | date | time | timestamp | timestamp_tz | null   (and a few aliases)
               optionally with a display length, as SQL writes it: int(11), varchar(255)
    decimal := decimal(p, s) | decimal(p)          p in 1..38, 0 <= s <= p
    array   := array<type>
    map     := map<type, type>
    row     := an object { name = type, ... }      (in HOCON, or as a string of HOCON or JSON)
             | row<name type, ...>                 (the form ``type_name`` prints)

A row written as a string may sit inside ``array<...>`` and ``map<...>``:
``"map<string, {c_int = int, c_row = {c_int = int}}>"`` or its JSON spelling.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from pyspark.sql import types as T

_SIMPLE = {
    "tinyint": T.ByteType(), "byte": T.ByteType(),
    "smallint": T.ShortType(), "short": T.ShortType(),
    "int": T.IntegerType(), "integer": T.IntegerType(),
    "bigint": T.LongType(), "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "decimal": T.DecimalType(38, 18),
    "string": T.StringType(), "varchar": T.StringType(), "char": T.StringType(), "text": T.StringType(),
    "boolean": T.BooleanType(), "bool": T.BooleanType(),
    "bytes": T.BinaryType(), "binary": T.BinaryType(),
    "date": T.DateType(),
    "time": T.TimeType(6),
    "timestamp": T.TimestampNTZType(),
    "timestamp_tz": T.TimestampType(),
    "null": T.NullType(),
}
_NAMES = ("string, boolean, tinyint, smallint, int, bigint, float, double, decimal(p, s), bytes, "
          "date, time, timestamp, timestamp_tz, null, array<t>, map<k, v>, or an object for a row")
_SIZED = re.compile(r"(tinyint|smallint|int|integer|bigint|varchar|char|string)\s*\(\s*\d+\s*\)")
_DECIMAL = re.compile(r"decimal\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_GENERIC = re.compile(r"(array|map|row)\s*<(.*)>", re.IGNORECASE | re.DOTALL)
MAX_PRECISION = 38
# A field read from a database column keeps the column's declared type in its metadata (what
# SeaTunnel calls the column's source type), so a sink writing into the same kind of database
# can create the column alike: geometry(Point,4326) rather than the text that carries it.
# Spark keeps a field's metadata while the field passes through unchanged and drops it as soon
# as an expression computes the field, which is when the declared type stops being true.
SOURCE_TYPE = "seatide.source_type"          # "geometry(Point,4326)", "int(10) unsigned"
SOURCE_DIALECT = "seatide.source_dialect"    # "postgresql" or "mysql" (seatide.connectors.jdbc.url)
# The source column's NOT NULL (true) and DEFAULT (["literal", "yy"], ["now", 6 or null] or
# ["expression", text]), where a CDC source knows them: a sink that adds the column defines it so
SOURCE_NOT_NULL = "seatide.not_null"
SOURCE_DEFAULT = "seatide.default"


class SchemaError(ValueError):
    """An unparsable type name; the message says what was expected."""


def parse_type(spec: Any) -> T.DataType:
    """Parse one SeaTunnel type (see the module doc for the grammar)."""
    if isinstance(spec, Mapping):
        return parse_row(spec)
    if not isinstance(spec, str):
        raise SchemaError(f"a type must be a name such as bigint or an object of fields, got {spec!r}")
    text = spec.strip()
    lower = text.lower()
    if lower in _SIMPLE:
        return _SIMPLE[lower]
    if _SIZED.fullmatch(lower):
        return _SIMPLE[lower.split("(")[0].strip()]
    match = _DECIMAL.fullmatch(lower)
    if match:
        return _decimal(int(match.group(1)), int(match.group(2) or 0))
    if text.startswith("{"):
        return parse_row(_object(text))
    match = _GENERIC.fullmatch(text)
    if match:
        kind, inner = match.group(1).lower(), match.group(2)
        if kind == "array":
            return T.ArrayType(parse_type(inner))
        if kind == "map":
            parts = split_top_level(inner)
            if len(parts) != 2:
                raise SchemaError(f"'{text}': a map needs a key and a value type, e.g. map<string, int>")
            return T.MapType(parse_type(parts[0]), parse_type(parts[1]))
        return _row_of_pairs(text, inner)
    raise SchemaError(f"unknown type '{text}' (known: {_NAMES})")


def parse_row(fields: Mapping[str, Any]) -> T.StructType:
    """``{name = type, ...}`` -> StructType, in the order written; every field nullable."""
    structure = []
    for name, spec in fields.items():
        try:
            structure.append(T.StructField(str(name), parse_type(spec), True))
        except SchemaError as exc:
            raise SchemaError(f"field '{name}': {exc}") from None
    return T.StructType(structure)


def _decimal(precision: int, scale: int) -> T.DecimalType:
    if not 1 <= precision <= MAX_PRECISION or scale > precision:
        raise SchemaError(f"decimal({precision}, {scale}) is out of range: precision 1..{MAX_PRECISION}, "
                          "scale 0..precision")
    return T.DecimalType(precision, scale)


def _object(text: str) -> Mapping[str, Any]:
    """A row written as a string: HOCON (``{a = int}``) or JSON (``{"a": "int"}``)."""
    from seatide.config.hocon import HoconError, parse

    try:
        # No environment: a row type is read by the coordinator and by drivers alike, and a ${NAME} in it
        # must not read either's (config/job_environment.py).
        tree = parse(text, environ={}).value
    except HoconError as exc:
        raise SchemaError(f"'{text}' is not an object of fields such as {{a = int, b = string}} ({exc})") from None
    if not isinstance(tree, Mapping):
        raise SchemaError(f"'{text}' is not an object of fields such as {{a = int, b = string}}")
    return tree


def _row_of_pairs(text: str, inner: str) -> T.StructType:
    fields = []
    for part in split_top_level(inner):
        name, _, spec = part.strip().partition(" ")
        if not spec.strip():
            raise SchemaError(f"'{text}': each row field is 'name type', e.g. row<a int, b string>")
        fields.append(T.StructField(name.strip("`\""), parse_type(spec), True))
    return T.StructType(fields)


def split_top_level(text: str) -> list[str]:
    """Split on commas outside <>, (), {}, [] and quotes: the arguments of map<...> and row<...>."""
    parts, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def same_type(actual: T.DataType, expected: T.DataType) -> bool:
    """Equal as SeaTunnel compares types: by field names and types, not Spark's nullability
    flags; a decimal matches one of the same scale and at least its precision."""
    if isinstance(actual, T.DecimalType) and isinstance(expected, T.DecimalType):
        return actual.scale == expected.scale and actual.precision <= expected.precision
    if isinstance(actual, T.ArrayType) and isinstance(expected, T.ArrayType):
        return same_type(actual.elementType, expected.elementType)
    if isinstance(actual, T.MapType) and isinstance(expected, T.MapType):
        return same_type(actual.keyType, expected.keyType) and same_type(actual.valueType, expected.valueType)
    if isinstance(actual, T.StructType) and isinstance(expected, T.StructType):
        return (actual.names == expected.names
                and all(same_type(a.dataType, e.dataType) for a, e in zip(actual.fields, expected.fields)))
    return actual == expected


def type_name(data_type: T.DataType) -> str:
    """Spark type -> SeaTunnel name, for messages and Assert's field_type."""
    if isinstance(data_type, T.DecimalType):   # before the names: bare `decimal` hides (38,18)
        return f"decimal({data_type.precision},{data_type.scale})"
    for name, candidate in _SIMPLE.items():
        if candidate == data_type:
            return name
    if isinstance(data_type, T.ArrayType):
        return f"array<{type_name(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{type_name(data_type.keyType)}, {type_name(data_type.valueType)}>"
    if isinstance(data_type, T.StructType):
        return "row<" + ", ".join(f"{f.name} {type_name(f.dataType)}" for f in data_type.fields) + ">"
    return data_type.simpleString()


# -- maps keyed by other types than text, in JSON ------------------------------------------
# A JSON object's keys are text. Spark's JSON writer (and to_json) writes a date key as its day
# number and a timestamp key as microseconds; its JSON reader (and from_json) takes only string
# keys. A map keyed by another type goes into JSON with its keys as the values' text (a date
# as 2024-01-26, as SeaTunnel writes it) and comes back by casting them.

def keyed_by_other_than_text(data_type: T.DataType) -> bool:
    """Whether ``data_type`` holds, at any depth, a map whose keys are not strings."""
    if isinstance(data_type, T.MapType):
        return not isinstance(data_type.keyType, T.StringType) or keyed_by_other_than_text(data_type.valueType)
    if isinstance(data_type, T.ArrayType):
        return keyed_by_other_than_text(data_type.elementType)
    return isinstance(data_type, T.StructType) and any(keyed_by_other_than_text(f.dataType) for f in data_type.fields)


def text_keyed(data_type: T.DataType) -> T.DataType:
    """``data_type`` with every map's keys strings: what Spark reads from JSON for it."""
    if isinstance(data_type, T.MapType):
        return T.MapType(T.StringType(), text_keyed(data_type.valueType), data_type.valueContainsNull)
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(text_keyed(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, text_keyed(f.dataType), f.nullable, f.metadata)
                             for f in data_type.fields])
    return data_type


def map_keys_as(column, data_type: T.DataType, to_text: bool):
    """``column`` (of ``data_type``) with every map's keys as text (``to_text``), or back from
    text to ``data_type``'s key types; nothing else is touched (Spark 4.3 would refuse to cast a
    TIME value nested in an array even to itself)."""
    from pyspark.sql import functions as F

    if not keyed_by_other_than_text(data_type):
        return column
    if isinstance(data_type, T.MapType):
        key = data_type.keyType
        keyed = column if isinstance(key, T.StringType) else \
            F.transform_keys(column, lambda k, _: k.cast("string") if to_text else k.cast(key))
        if not keyed_by_other_than_text(data_type.valueType):
            return keyed
        return F.transform_values(keyed, lambda _, v: map_keys_as(v, data_type.valueType, to_text))
    if isinstance(data_type, T.ArrayType):
        return F.transform(column, lambda item: map_keys_as(item, data_type.elementType, to_text))
    return F.when(column.isNotNull(), F.struct(*[map_keys_as(column[f.name], f.dataType, to_text).alias(f.name)
                                                 for f in data_type.fields]))


def source_metadata(dialect: str, declared: str | None) -> dict:
    """Field metadata naming the database column type a field was read from (empty: unknown)."""
    return {SOURCE_DIALECT: dialect, SOURCE_TYPE: declared} if declared else {}


def declared_type(field: T.StructField, dialect: str) -> str | None:
    """The column type ``field`` was read from, when it was read from a ``dialect`` database."""
    metadata = field.metadata or {}
    return metadata.get(SOURCE_TYPE) if metadata.get(SOURCE_DIALECT) == dialect else None


def quote_field(name: str) -> str:
    """A field name as Spark SQL and ``col()`` read it, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"
