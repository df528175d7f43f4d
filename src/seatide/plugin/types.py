"""SeaTunnel type names -> Spark types.

SeaTunnel schemas are written as ``fields { id = bigint, price = "decimal(10, 2)",
tags = "array<string>", attrs = "map<string, int>", point { x = double, y = double } }``.
A nested object is a row (Spark struct).
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
    "string": T.StringType(), "varchar": T.StringType(), "text": T.StringType(),
    "boolean": T.BooleanType(), "bool": T.BooleanType(),
    "bytes": T.BinaryType(), "binary": T.BinaryType(),
    "date": T.DateType(),
    "time": T.TimeType(6),
    "timestamp": T.TimestampNTZType(),
    "timestamp_tz": T.TimestampType(),
    "null": T.NullType(),
}


class SchemaError(ValueError):
    """An unparsable type name; the message says what was expected."""


def parse_type(spec: Any) -> T.DataType:
    """Parse one SeaTunnel type: a name, ``decimal(p,s)``, ``array<t>``, ``map<k,v>`` or an object (row)."""
    if isinstance(spec, Mapping):
        return parse_row(spec)
    if not isinstance(spec, str):
        raise SchemaError(f"a type must be a name such as bigint or an object of fields, got {spec!r}")
    text = spec.strip()
    lower = text.lower()
    if lower in _SIMPLE:
        return _SIMPLE[lower]
    match = re.fullmatch(r"decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)", lower)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaError(f"decimal({precision},{scale}) is out of range: precision 1..38, scale <= precision")
        return T.DecimalType(precision, scale)
    match = re.fullmatch(r"array\s*<(.*)>", text, flags=re.IGNORECASE | re.DOTALL)
    if match:
        return T.ArrayType(parse_type(match.group(1)))
    match = re.fullmatch(r"map\s*<(.*)>", text, flags=re.IGNORECASE | re.DOTALL)
    if match:
        key, value = _split_top_level(match.group(1))
        return T.MapType(parse_type(key), parse_type(value))
    known = ", ".join(sorted({"tinyint", "smallint", "int", "bigint", "float", "double", "decimal(p,s)",
                              "string", "boolean", "bytes", "date", "time", "timestamp", "null",
                              "array<t>", "map<k,v>"}))
    raise SchemaError(f"unknown type '{text}' (known: {known}, or an object for a nested row)")


def parse_row(fields: Mapping[str, Any]) -> T.StructType:
    """``{name = type, ...}`` -> StructType, in the order written."""
    return T.StructType([T.StructField(str(name), parse_type(spec), True) for name, spec in fields.items()])


def _split_top_level(text: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            return text[:i].strip(), text[i + 1:].strip()
    raise SchemaError(f"map<{text}> needs a key and a value type: map<string, int>")


def type_name(data_type: T.DataType) -> str:
    """Spark type -> SeaTunnel name, for messages and Assert's field_type."""
    for name, candidate in _SIMPLE.items():
        if candidate == data_type:
            return name
    if isinstance(data_type, T.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    if isinstance(data_type, T.ArrayType):
        return f"array<{type_name(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{type_name(data_type.keyType)}, {type_name(data_type.valueType)}>"
    if isinstance(data_type, T.StructType):
        return "row<" + ", ".join(f"{f.name} {type_name(f.dataType)}" for f in data_type.fields) + ">"
    return data_type.simpleString()
