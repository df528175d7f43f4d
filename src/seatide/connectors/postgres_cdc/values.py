"""PostgreSQL column types -> SeaTunnel types -> Spark and Arrow types, and text values -> Python.

Snapshot rows are selected as ``column::text`` and pgoutput sends changes in the same text
format, so one converter per type serves both and the two can never disagree.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from seatide.connectors.decimals import decimal_converter

# typname -> SeaTunnel type name (the page's type table; timestamptz and uuid are SeaTide's additions)
_SCALARS = {
    "bool": "boolean", "bytea": "bytes",
    "int2": "int", "int4": "int", "int8": "bigint",
    "float4": "float", "float8": "double",
    "bpchar": "string", "varchar": "string", "text": "string", "json": "string", "jsonb": "string",
    "geometry": "string", "geography": "string", "uuid": "string",
    "timestamp": "timestamp", "timestamptz": "timestamp_tz", "time": "time", "date": "date",
}
_ARRAYS = {
    "_bool": "array<boolean>", "_int2": "array<int>", "_int4": "array<int>", "_int8": "array<bigint>",
    "_float4": "array<float>", "_float8": "array<double>",
    "_bpchar": "array<string>", "_varchar": "array<string>", "_text": "array<string>",
}


class UnsupportedType(ValueError):
    pass


def seatunnel_type(typname: str, typmod: int) -> str:
    """The SeaTunnel type of a column, from pg_type.typname and pg_attribute.atttypmod."""
    if typname == "numeric":
        if typmod < 4:
            return "decimal(38, 18)"
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return f"decimal({precision}, {scale})" if precision <= 38 else "decimal(38, 18)"
    found = _SCALARS.get(typname) or _ARRAYS.get(typname)
    if found is None:
        known = ", ".join(sorted({*_SCALARS, *_ARRAYS, "numeric"}))
        raise UnsupportedType(f"type {typname} is not supported (supported: {known})")
    return found


@dataclass(frozen=True)
class ColumnType:
    """How one column's text values become Arrow values."""

    seatunnel: str
    arrow: object                    # pyarrow.DataType
    convert: Callable[[str], object]


def column_type(seatunnel: str, session_time_zone: str = "UTC") -> ColumnType:
    """``session_time_zone``: Spark's spark.sql.session.timeZone, which Spark expects on
    Arrow timestamps with a time zone."""
    import pyarrow as pa

    if seatunnel.startswith("array<"):
        element = column_type(seatunnel[6:-1], session_time_zone)
        # Spark names a list's item field "element"; Arrow's default is "item"
        return ColumnType(seatunnel, pa.list_(pa.field("element", element.arrow)),
                          lambda text, c=element.convert: [None if v is None else c(v) for v in parse_array(text)])
    if seatunnel.startswith("decimal("):
        precision, scale = (int(p) for p in seatunnel[8:-1].split(","))
        return ColumnType(seatunnel, pa.decimal128(precision, scale), decimal_converter(precision, scale))
    arrow, convert = {
        # pgoutput writes t/f (boolout); bool::text in a snapshot query says true/false
        "boolean": (pa.bool_(), lambda v: v in ("t", "true")),
        "bytes": (pa.binary(), _bytea),
        "int": (pa.int32(), int), "bigint": (pa.int64(), int),
        "float": (pa.float32(), float), "double": (pa.float64(), float),
        "string": (pa.string(), str),
        "timestamp": (pa.timestamp("us"), _timestamp),
        "timestamp_tz": (pa.timestamp("us", tz=session_time_zone), _timestamp_tz),
        "time": (pa.time64("ns"), dt.time.fromisoformat),    # what Spark expects for TIME(6)
        "date": (pa.date32(), _date),
    }[seatunnel]
    return ColumnType(seatunnel, arrow, convert)


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise ValueError(f"bytea value not in hex format: set bytea_output = hex ({text[:20]!r})")


def _date(text: str):
    return None if text in ("infinity", "-infinity") or text.endswith(" BC") else dt.date.fromisoformat(text)


def _timestamp(text: str):
    return None if text in ("infinity", "-infinity") or text.endswith(" BC") else dt.datetime.fromisoformat(text)


def _timestamp_tz(text: str):
    value = _timestamp(text)
    return None if value is None else value.astimezone(dt.timezone.utc)


def parse_array(text: str) -> list:
    """Elements of a one-dimensional array literal ``{1,NULL,"a,b"}``, as text (None for NULL)."""
    if text.startswith("["):         # explicit bounds: [0:1]={...}
        text = text[text.index("=") + 1:]
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not an array literal: {text[:40]!r}")
    body, items, i = text[1:-1], [], 0
    if not body:
        return items
    while i <= len(body):
        if i < len(body) and body[i] == '"':
            i, chars = i + 1, []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                chars.append(body[i])
                i += 1
            items.append("".join(chars))
            i += 2                    # the closing quote and the comma
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            token = body[i:end]
            if token.startswith("{"):
                raise ValueError("multi-dimensional arrays are not supported")
            items.append(None if token == "NULL" else token)
            i = end + 1
    return items
