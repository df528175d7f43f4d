"""FakeSource's explicit ``rows``: job-file values -> Spark SQL literals, checked up front.

``rows = [{ kind = INSERT, fields = [1, "A", 100] }, ...]`` lists the rows every parallel
reader emits. Values follow SeaTunnel's conventions: bytes are base64 strings, dates,
times and timestamps ISO strings, decimals numbers or strings, maps objects, nested rows
lists (by position) or objects (by name).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import math
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from seatide.connectors.fake.options import INTEGER_BOUNDS
from seatide.connectors.fake.sql import double_lit, sql_type, string_lit, typed_null
from seatide.plugin.options import FLOAT, INT, KeyCheck, kind_of
from seatide.plugin.rowkind import RowKind
from seatide.plugin.types import MAX_PRECISION


class RowValueError(ValueError):
    """A value in ``rows`` does not fit its field; the message says where and why."""


@dataclass(frozen=True)
class ExplicitRow:
    kind: RowKind
    values: tuple[str, ...]      # one SQL literal per schema field


_INTEGER_TYPES = {T.ByteType: "tinyint", T.ShortType: "smallint", T.IntegerType: "int",
                  T.LongType: "bigint"}


def parse_rows(rows: list, schema: T.StructType, check_keys: KeyCheck | None = None) -> list[ExplicitRow]:
    """The explicit rows; a row's unknown keys go to ``check_keys`` (``plugin.options.KeyCheck``)."""
    keys = check_keys or KeyCheck()
    parsed = []
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        if not isinstance(row, dict) or "fields" not in row:
            raise RowValueError(f"{where} must be an object {{ kind = INSERT, fields = [...] }}")
        keys(row, ("kind", "fields"), where)
        try:
            kind = RowKind.parse(row.get("kind", "INSERT"))
        except ValueError as exc:
            raise RowValueError(f"{where}.kind: {exc}") from None
        values = row["fields"]
        if not isinstance(values, list) or len(values) != len(schema.fields):
            got = len(values) if isinstance(values, list) else kind_of(values)
            raise RowValueError(f"{where}.fields must list one value per schema field "
                                f"({len(schema.fields)}: {', '.join(schema.names)}), got {got}")
        literals = tuple(literal(v, f.dataType, f"{where}.fields[{j}] ({f.name})")
                         for j, (v, f) in enumerate(zip(values, schema.fields)))
        parsed.append(ExplicitRow(kind, literals))
    return parsed


def literal(value: Any, data_type: T.DataType, where: str) -> str:
    """The SQL literal for ``value`` as ``data_type``; raises RowValueError naming ``where``.
    A field of type null is NULL whatever value a row gives it, as in SeaTunnel."""
    if value is None or isinstance(data_type, T.NullType):
        return typed_null(data_type)
    try:
        return _literal(value, data_type, where)
    except RowValueError:
        raise
    except (ValueError, TypeError, ArithmeticError, binascii.Error):
        expected = data_type.simpleString()
        raise RowValueError(f"{where}: {value!r} is not a valid {expected} value") from None


def _literal(value: Any, data_type: T.DataType, where: str) -> str:
    for spark_type, name in _INTEGER_TYPES.items():
        if isinstance(data_type, spark_type):
            number = _integer(value)
            low, high = INTEGER_BOUNDS[name]
            if not low <= number <= high:
                raise RowValueError(f"{where}: {number} is out of range for {name} ({low}..{high})")
            return f"CAST({number} AS {sql_type(data_type)})"
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        number = _float(value)
        return f"CAST({double_lit(number)} AS {sql_type(data_type)})"
    if isinstance(data_type, T.DecimalType):
        return _decimal(value, data_type, where)
    if isinstance(data_type, T.StringType):
        if isinstance(value, (dict, list, bool)):
            raise TypeError
        return string_lit(str(value))
    if isinstance(data_type, T.BooleanType):
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise TypeError
        return "TRUE" if value else "FALSE"
    if isinstance(data_type, T.BinaryType):
        raw = base64.b64decode(_text(value), validate=True)
        return f"unbase64({string_lit(base64.b64encode(raw).decode())})"
    if isinstance(data_type, T.DateType):
        return f"CAST({string_lit(dt.date.fromisoformat(_text(value)).isoformat())} AS DATE)"
    if isinstance(data_type, T.TimeType):
        return f"CAST({string_lit(dt.time.fromisoformat(_text(value)).isoformat())} AS {sql_type(data_type)})"
    if isinstance(data_type, (T.TimestampNTZType, T.TimestampType)):
        stamp = dt.datetime.fromisoformat(_text(value))
        return f"CAST({string_lit(stamp.isoformat(sep=' '))} AS {sql_type(data_type)})"
    if isinstance(data_type, T.ArrayType):
        return _array(value, data_type, where)
    if isinstance(data_type, T.MapType):
        return _map(value, data_type, where)
    if isinstance(data_type, T.StructType):
        return _struct(value, data_type, where)
    raise RowValueError(f"{where}: values of type {data_type.simpleString()} are not supported")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value.strip()


def _integer(value: Any) -> int:
    return INT.coerce(value)   # the same rule as an integer option


def _float(value: Any) -> float:
    number = FLOAT.coerce(value)
    if not math.isfinite(number):
        raise ValueError
    return number


def _decimal(value: Any, data_type: T.DecimalType, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError
    # Python's default context keeps 28 digits: too few for decimal(38, s), whose values
    # would fail to quantize although they fit.
    with decimal.localcontext() as context:
        context.prec = 2 * MAX_PRECISION
        number = decimal.Decimal(str(value).strip())
        if not number.is_finite():
            raise ValueError
        rounded = number.quantize(decimal.Decimal(1).scaleb(-data_type.scale), rounding=decimal.ROUND_HALF_UP)
    whole = rounded.copy_abs().to_integral_value(rounding=decimal.ROUND_DOWN)
    whole_digits = 0 if whole == 0 else whole.adjusted() + 1
    if whole_digits > data_type.precision - data_type.scale:
        raise RowValueError(f"{where}: {value} does not fit {data_type.simpleString()} "
                            f"(at most {data_type.precision - data_type.scale} digits before the point)")
    return f"CAST({string_lit(format(rounded, 'f'))} AS {sql_type(data_type)})"


def _array(value: Any, data_type: T.ArrayType, where: str) -> str:
    if not isinstance(value, list):
        raise RowValueError(f"{where}: an array value must be a list, got {value!r}")
    items = [literal(v, data_type.elementType, f"{where}[{i}]") for i, v in enumerate(value)]
    return f"CAST(array({', '.join(items)}) AS {sql_type(data_type)})"


def _map(value: Any, data_type: T.MapType, where: str) -> str:
    if not isinstance(value, dict):
        raise RowValueError(f"{where}: a map value must be an object {{\"key\": value}}, got {value!r}")
    parts = []
    for key, item in value.items():
        parts += [literal(key, data_type.keyType, f"{where} key {key!r}"),
                  literal(item, data_type.valueType, f"{where}[{key!r}]")]
    return f"CAST(map({', '.join(parts)}) AS {sql_type(data_type)})"


def _struct(value: Any, data_type: T.StructType, where: str) -> str:
    fields = data_type.fields
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(data_type.names))
        if unknown:
            raise RowValueError(f"{where}: no field '{unknown[0]}' in row<{', '.join(data_type.names)}>")
        value = [value.get(name) for name in data_type.names]
    if not isinstance(value, list) or len(value) != len(fields):
        raise RowValueError(f"{where}: a row value must be a list of {len(fields)} values or an "
                            f"object with fields {', '.join(data_type.names)}")
    parts = []
    for f, item in zip(fields, value):
        parts += [string_lit(f.name), literal(item, f.dataType, f"{where}.{f.name}")]
    return f"named_struct({', '.join(parts)})"
