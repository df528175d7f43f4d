"""Spark SQL text for FakeSource's column expressions: literals, identifiers, type names.

Columns are generated as SQL text (one ``selectExpr``) so the JVM makes every row; these
helpers make that text safe whatever names and values a job file holds.
"""

from __future__ import annotations

import math

from pyspark.sql import types as T

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


def ident(name: str) -> str:
    """A column or field name, quoted so dots, spaces and keywords are harmless."""
    return "`" + name.replace("`", "``") + "`"


def string_lit(text: str) -> str:
    """A string literal; everything but plain ASCII is written as \\uXXXX escapes."""
    out = []
    for ch in text:
        if ch.isascii() and (ch.isalnum() or ch in " _-.:,;/#@!?()[]{}=+*&%$^~<>|"):
            out.append(ch)
        else:
            data = ch.encode("utf-16-be")  # non-BMP characters become surrogate pairs
            for i in range(0, len(data), 2):
                out.append("\\u%04x" % int.from_bytes(data[i:i + 2], "big"))
    return "'" + "".join(out) + "'"


def long_lit(value: int) -> str:
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValueError(f"{value} does not fit in a bigint")
    return f"{value}L"


def double_lit(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    # Spark parses the shortest round-trip text exactly; the cast is folded at planning.
    return f"CAST('{value!r}' AS DOUBLE)"


def sql_type(data_type: T.DataType) -> str:
    """Spark SQL type text for CAST, with struct field names quoted."""
    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{ident(f.name)}: {sql_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{sql_type(data_type.keyType)}, {sql_type(data_type.valueType)}>"
    if isinstance(data_type, T.NullType):
        return "VOID"
    return data_type.simpleString().upper()


def typed_null(data_type: T.DataType) -> str:
    return f"CAST(NULL AS {sql_type(data_type)})"
