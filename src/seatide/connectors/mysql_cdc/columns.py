"""MySQL column types -> SeaTunnel types -> Spark and Arrow types, and value conversion.

The mapping follows SeaTunnel's MySQL-CDC type table. Values reach us from two clients
that disagree on details — PyMySQL for the snapshot, the binlog decoder for changes (BIT
as bytes or as a string of bits, unsigned integers as negative numbers when the server
does not log column metadata, ENUM as an index) — so each column has one ``convert``
that turns either form into the value its Arrow type takes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable
from zoneinfo import ZoneInfo

import pyarrow as pa
from pyspark.sql import types as T

from seatide.plugin.types import parse_type

# Spark type -> the Arrow type a reader must yield for it (decimals are built from p and s).
_ARROW = {
    T.BooleanType(): pa.bool_(), T.ByteType(): pa.int8(), T.ShortType(): pa.int16(),
    T.IntegerType(): pa.int32(), T.LongType(): pa.int64(), T.FloatType(): pa.float32(),
    T.DoubleType(): pa.float64(), T.StringType(): pa.string(), T.BinaryType(): pa.binary(),
    T.DateType(): pa.date32(), T.TimestampNTZType(): pa.timestamp("us"),
}
UNSIGNED_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
# (integer type, unsigned) -> SeaTunnel type wide enough for every value; the rest are int.
_INTEGER_TYPES = {("tinyint", False): "tinyint", ("tinyint", True): "smallint",
                  ("smallint", False): "smallint", ("bigint", False): "bigint",
                  ("int", True): "bigint", ("integer", True): "bigint", ("bigint", True): "decimal(20,0)"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
          "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
          "geometrycollection"}


class UnsupportedColumn(ValueError):
    """A column whose MySQL type has no SeaTunnel mapping."""


@dataclass(frozen=True)
class Column:
    name: str
    column_type: str        # as information_schema.COLUMNS.COLUMN_TYPE says: "int(10) unsigned"
    seatunnel_type: str     # "bigint", "decimal(20,0)", ...
    convert: Callable[[Any], Any]

    @property
    def spark_type(self) -> T.DataType:
        return parse_type(self.seatunnel_type)

    @property
    def arrow_type(self) -> pa.DataType:
        spark = self.spark_type
        if isinstance(spark, T.DecimalType):
            return pa.decimal128(spark.precision, spark.scale)
        return _ARROW[spark]


def column(name: str, data_type: str, column_type: str, precision: int | None, scale: int | None,
           zone: ZoneInfo) -> Column:
    """One column from information_schema (DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION/SCALE)."""
    base = data_type.lower()
    full = column_type.lower()
    unsigned = "unsigned" in full
    width = _width(full)
    if (base == "bit" and width in (None, 1)) or (base == "tinyint" and width == 1):
        return Column(name, column_type, "boolean", _to_bool)
    if base in UNSIGNED_BITS:
        seatunnel = _INTEGER_TYPES.get((base, unsigned), "int")
        bits = UNSIGNED_BITS[base] if unsigned else 0
        return Column(name, column_type, seatunnel, _to_int(bits, seatunnel == "decimal(20,0)"))
    if base == "year":
        return Column(name, column_type, "int", _to_int(0, False))
    if base in ("decimal", "numeric"):
        p, s = int(precision or 10), int(scale or 0)
        if p > 38:   # Spark's decimals stop at 38 digits; keep the exact digits as text
            return Column(name, column_type, "string", _to_text)
        return Column(name, column_type, f"decimal({p},{s})", _to_decimal)
    if base == "float":
        return Column(name, column_type, "float", _to_float)
    if base in ("double", "real", "double precision"):
        return Column(name, column_type, "double", _to_float)
    if base in _TEXT:
        return Column(name, column_type, "string", _to_text)
    if base == "enum":
        return Column(name, column_type, "string", _to_enum(quoted_values(column_type)))
    if base == "set":
        return Column(name, column_type, "string", _to_set(quoted_values(column_type)))
    if base == "date":
        return Column(name, column_type, "date", _to_date)
    if base == "time":
        return Column(name, column_type, "string", _to_time_text)
    if base == "datetime":
        return Column(name, column_type, "timestamp", _to_datetime(None))
    if base == "timestamp":
        return Column(name, column_type, "timestamp", _to_datetime(zone))
    if base == "bit":
        return Column(name, column_type, "bytes", _bits_to_bytes(width or 1))
    if base in _BYTES:
        return Column(name, column_type, "bytes", _to_bytes)
    raise UnsupportedColumn(f"column {name} has type {column_type}, which MySQL-CDC cannot map "
                            "to a SeaTunnel type")


def _width(column_type: str) -> int | None:
    match = re.search(r"\((\d+)\)", column_type)
    return int(match.group(1)) if match else None


def quoted_values(column_type: str) -> list[str]:
    return [v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'", column_type)]


def _nullable(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


def _bool(value: Any) -> bool:
    if isinstance(value, (bytes, bytearray)):
        return any(value)
    if isinstance(value, str):       # the binlog decoder shows BIT(1) as "0" / "1"
        return "1" in value
    return bool(value)


_to_bool = _nullable(_bool)


def _to_int(unsigned_bits: int, as_decimal: bool) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        number = int(value)
        if unsigned_bits and number < 0:   # logged without column metadata: two's complement
            number += 1 << unsigned_bits
        return Decimal(number) if as_decimal else number
    return _nullable(convert)


def _to_decimal_value(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


_to_decimal = _nullable(_to_decimal_value)
_to_float = _nullable(float)


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, (dict, list)):   # MySQL's binary JSON, decoded by the binlog reader
        return json.dumps(value, default=_json_default, separators=(", ", ": "))
    return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _json_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_text(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_keys(v) for v in value]
    return value


_to_text = _nullable(lambda value: _text(_json_keys(value)))


def _to_enum(values: list[str]) -> Callable[[Any], Any]:
    def convert(value: Any) -> str:
        if isinstance(value, int):      # an index when the server logs no column metadata
            return values[value - 1] if 0 < value <= len(values) else ""
        return _text(value)
    return _nullable(convert)


def _to_set(values: list[str]) -> Callable[[Any], Any]:
    def convert(value: Any) -> str:
        if isinstance(value, int):
            return ",".join(v for i, v in enumerate(values) if value >> i & 1)
        if isinstance(value, (set, frozenset)):
            return ",".join(v for v in values if v in value)
        return _text(value)
    return _nullable(convert)


def _date(value: Any) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return value.date()
    return value if isinstance(value, dt.date) else None   # '0000-00-00' arrives as text


_to_date = _nullable(_date)


def _time_text(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
        sign, micros = ("-" if micros < 0 else ""), abs(micros)
        seconds, fraction = divmod(micros, 1_000_000)
        text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return text + (f".{fraction:06d}" if fraction else "")
    if isinstance(value, dt.time):
        return value.isoformat()
    return _text(value)


_to_time_text = _nullable(_time_text)


def _to_datetime(zone: ZoneInfo | None) -> Callable[[Any], Any]:
    """DATETIME is a wall-clock value; TIMESTAMP arrives in UTC and is shown in ``zone``."""
    def convert(value: Any) -> dt.datetime | None:
        if not isinstance(value, dt.datetime):
            return None          # zero dates
        if zone is None:
            return value
        return value.replace(tzinfo=dt.timezone.utc).astimezone(zone).replace(tzinfo=None)
    return _nullable(convert)


def _bits_to_bytes(width: int) -> Callable[[Any], Any]:
    size = (width + 7) // 8

    def convert(value: Any) -> bytes:
        if isinstance(value, str):      # the binlog decoder's "0101..."
            return int(value or "0", 2).to_bytes(size, "big")
        if isinstance(value, int):
            return value.to_bytes(size, "big")
        return bytes(value)
    return _nullable(convert)


def _bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


_to_bytes = _nullable(_bytes)
