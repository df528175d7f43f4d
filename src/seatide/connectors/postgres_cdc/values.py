"""PostgreSQL column types -> SeaTunnel types -> Spark and Arrow types, and text values -> Python.

Snapshot rows are selected as ``column::text`` and pgoutput sends changes in the same text
format, so one converter per type serves both and the two can never disagree.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from seatide.connectors.decimals import decimal_converter
from seatide.connectors.pg_types import (EWKT, MONEY, MONEY_PRECISION, MONEY_SCALE, POSTGIS_TYPES, TEXT, PgType,
                                         carriage, ewkt_from_hex_ewkb, money_text_to_plain)

# typname -> SeaTunnel type name: the page's type table for the types it lists
# (seatide.connectors.pg_types.NATIVE_TYPES; timestamptz is SeaTide's addition); how every
# other type travels (text, EWKT, money) is decided in pg_types.carriage.
_SCALARS = {
    "bool": "boolean", "bytea": "bytes",
    "int2": "int", "int4": "int", "int8": "bigint",
    "float4": "float", "float8": "double",
    "bpchar": "string", "varchar": "string", "text": "string", "name": "string",
    "timestamp": "timestamp", "timestamptz": "timestamp_tz", "time": "time", "timetz": "time", "date": "date",
}


class UnsupportedType(ValueError):
    pass


class UnrepresentableValue(ValueError):
    """A value of the column's type that Spark's type cannot hold (``infinity``, a date before
    Christ or after 9999): never turned into null; the reader fails naming the column."""


# What ``infinity`` and ``-infinity`` of a date or timestamp become (option infinity.handling)
FAIL, CLAMP = "fail", "clamp"
INFINITY_HANDLING = (FAIL, CLAMP)


def seatunnel_type(pg: PgType, typmod: int) -> str:
    """The SeaTunnel type of a column of type ``pg`` (its base type, for a domain) and
    pg_attribute.atttypmod (the domain's typmod, for a domain)."""
    how = carriage(pg)
    if how is None:
        raise UnsupportedType(f"type {pg.display} is a pseudo-type, which names no column type its values "
                              "could be written back into")
    if how in (TEXT, EWKT):
        return "string"
    if how == MONEY:
        return f"decimal({MONEY_PRECISION}, {MONEY_SCALE})"
    if pg.is_array:
        element = pg.element.name
        return f"array<{_numeric(typmod) if element == 'numeric' else _SCALARS[element]}>"
    return _numeric(typmod) if pg.name == "numeric" else _SCALARS[pg.name]


def _money(text: str) -> str:
    try:
        return money_text_to_plain(text)
    except ValueError as exc:       # the session's lc_monetary is not C (set by stream.connect)
        raise UnrepresentableValue(str(exc)) from None


def _numeric(typmod: int) -> str:
    if typmod < 4:
        return "decimal(38, 18)"
    precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
    return f"decimal({precision}, {scale})" if precision <= 38 else "decimal(38, 18)"


@dataclass(frozen=True)
class ColumnType:
    """How one column's text values become Arrow values."""

    seatunnel: str
    arrow: object                    # pyarrow.DataType
    convert: Callable[[str], object]


def column_type(seatunnel: str, session_time_zone: str = "UTC", typname: str | None = None,
                infinity: str = FAIL) -> ColumnType:
    """``session_time_zone``: Spark's spark.sql.session.timeZone, which Spark expects on
    Arrow timestamps with a time zone. ``typname``: the column's PostgreSQL type, for the
    types whose text is not the SeaTunnel value's (PostGIS's hex EWKB, money, timetz).
    ``infinity``: FAIL (an infinite date or timestamp raises ``UnrepresentableValue``) or CLAMP
    (it becomes the last or first instant Spark holds)."""
    import pyarrow as pa

    if typname in POSTGIS_TYPES:
        return ColumnType(seatunnel, pa.string(), ewkt_from_hex_ewkb)
    if typname == "money":
        convert = decimal_converter(MONEY_PRECISION, MONEY_SCALE)
        return ColumnType(seatunnel, pa.decimal128(MONEY_PRECISION, MONEY_SCALE),
                          lambda text: convert(_money(text)))
    if typname == "timetz":
        return ColumnType(seatunnel, pa.time64("ns"), _utc_time_of_day)
    if seatunnel.startswith("array<"):
        element = column_type(seatunnel[6:-1], session_time_zone, infinity=infinity)
        # Spark names a list's item field "element"; Arrow's default is "item"
        return ColumnType(seatunnel, pa.list_(pa.field("element", element.arrow)),
                          lambda text, c=element.convert: [None if v is None else c(v) for v in parse_array(text)])
    if seatunnel.startswith("decimal("):
        precision, scale = (int(p) for p in seatunnel[8:-1].split(","))
        # exact: a numeric without precision (or p > 38) read as decimal(38, 18) must not be rounded
        return ColumnType(seatunnel, pa.decimal128(precision, scale), decimal_converter(precision, scale, exact=True))
    arrow, convert = {
        # pgoutput writes t/f (boolout); bool::text in a snapshot query says true/false
        "boolean": (pa.bool_(), lambda v: v in ("t", "true")),
        "bytes": (pa.binary(), _bytea),
        "int": (pa.int32(), int), "bigint": (pa.int64(), int),
        "float": (pa.float32(), float), "double": (pa.float64(), float),
        "string": (pa.string(), str),
        "timestamp": (pa.timestamp("us"), lambda text: _timestamp(text, infinity)),
        "timestamp_tz": (pa.timestamp("us", tz=session_time_zone), lambda text: _timestamp_tz(text, infinity)),
        "time": (pa.time64("ns"), dt.time.fromisoformat),    # what Spark expects for TIME(6)
        "date": (pa.date32(), lambda text: _date(text, infinity)),
    }[seatunnel]
    return ColumnType(seatunnel, arrow, convert)


def _utc_time_of_day(text: str) -> dt.time:
    """A timetz (``10:11:12+03``) as its UTC time of day (07:11:12), as the Jdbc source reads it."""
    value = dt.time.fromisoformat(text if len(text) < 3 or text[-3] not in "+-" else text + ":00")
    moment = dt.datetime.combine(dt.date(2000, 1, 1), value).astimezone(dt.timezone.utc)
    return moment.time()


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise ValueError(f"bytea value not in hex format: set bytea_output = hex ({text[:20]!r})")


# Spark's dates and timestamps run from 0001-01-01 to 9999-12-31 23:59:59.999999, as Python's
_LAST, _FIRST = dt.datetime.max, dt.datetime.min


def _date(text: str, infinity: str = FAIL) -> dt.date:
    if text in ("infinity", "-infinity"):
        return _infinite(text, infinity).date()
    return _held(text, dt.date.fromisoformat)


def _timestamp(text: str, infinity: str = FAIL) -> dt.datetime:
    if text in ("infinity", "-infinity"):
        return _infinite(text, infinity)
    return _held(text, dt.datetime.fromisoformat)


def _timestamp_tz(text: str, infinity: str = FAIL) -> dt.datetime:
    if text in ("infinity", "-infinity"):
        return _infinite(text, infinity).replace(tzinfo=dt.timezone.utc)
    return _held(text, lambda t: dt.datetime.fromisoformat(t).astimezone(dt.timezone.utc))


def _infinite(text: str, infinity: str) -> dt.datetime:
    if infinity == CLAMP:
        return _LAST if text == "infinity" else _FIRST
    raise UnrepresentableValue(
        f"value '{text}' has no Spark date or timestamp form; set infinity.handling = \"clamp\" to read "
        f"it as {_LAST if text == 'infinity' else _FIRST} (the {'last' if text == 'infinity' else 'first'} "
        "instant Spark holds)")


def _held(text: str, parse: Callable[[str], dt.date]):
    """``text`` parsed, when it lies in the years Spark holds (1 to 9999)."""
    try:
        if not text.endswith(" BC"):
            return parse(text)
    except (ValueError, OverflowError):
        pass
    raise UnrepresentableValue(f"value '{text}' lies outside the years 1 to 9999 that Spark's dates and "
                               "timestamps hold")


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
