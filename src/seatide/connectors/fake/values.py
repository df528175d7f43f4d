"""Generated values as Spark SQL expressions over the global row number.

Every value is a pure function of (field path, global row number, element index): a
64-bit ``xxhash64`` of those, turned into the field's type. So a replayed split yields
identical rows, and the JVM makes them at Spark's speed (no Python per row).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pyspark.sql import types as T

from seatide.connectors.fake.options import DEFAULT_YEAR
from seatide.connectors.fake.sql import LONG_MAX, double_lit, long_lit, sql_type, string_lit

ROW_NUMBER = "__g"          # the column holding the global row number
_LETTER_CHUNK = 7            # letters taken from one 64-bit hash (one per low byte)
# Each of the 7 low bytes of a hash, masked to 0b0010_1111 and lifted by 'A' (0x41), is a
# letter: bits 0-3 pick one of A..P, bit 5 lowers its case (a..p). One AND and one ADD per
# 7 letters, with no carry between bytes, so ANSI overflow checks never fire; measured on
# 10M rows at the cost of hex(), where translate() of a hex string cost 3x and per-byte
# arithmetic over all 52 letters cost 3x (ANSI-checked adds and multiplies).
_LETTER_MASK = 0x002F2F2F2F2F2F2F
_LETTER_BASE = 0x0041414141414141
_DIGIT_CHUNK = 18            # decimal digits taken from one hash
_UNIT = 1 << 53              # doubles in [0, 1) with 53 random bits


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    template: tuple[int, ...] | None = None


@dataclass(frozen=True)
class FloatRange:
    low: float
    high: float
    template: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ValueSettings:
    """What FakeSource's value options ask for, already validated."""

    integers: dict[str, IntRange]        # tinyint, smallint, int, bigint
    fractions: dict[str, FloatRange]     # float, double
    string_length: int
    string_template: tuple[str, ...] | None
    bytes_length: int
    array_size: int
    map_size: int
    date_parts: dict[str, tuple[int, ...] | None]   # year, month, day, hour, minute, second


_INTEGER_NAMES = {T.ByteType: "tinyint", T.ShortType: "smallint", T.IntegerType: "int",
                  T.LongType: "bigint"}


class ValueExpressions:
    """Builds the SQL expression that generates one field's values."""

    def __init__(self, settings: ValueSettings):
        self.settings = settings

    def field(self, data_type: T.DataType, path: str) -> str:
        return self._value(data_type, path, [ROW_NUMBER])

    # -- dispatch -------------------------------------------------------------------------
    def _value(self, data_type: T.DataType, path: str, coords: list[str]) -> str:
        for spark_type, name in _INTEGER_NAMES.items():
            if isinstance(data_type, spark_type):
                return self._integer(name, data_type, path, coords)
        if isinstance(data_type, (T.FloatType, T.DoubleType)):
            return self._fraction(data_type, path, coords)
        if isinstance(data_type, T.DecimalType):
            return self._decimal(data_type, path, coords)
        if isinstance(data_type, T.StringType):
            return self._string(path, coords)
        if isinstance(data_type, T.BinaryType):
            return self._letters(self.settings.bytes_length, path, coords, binary=True)
        if isinstance(data_type, T.BooleanType):
            return f"(({self._hash(path, coords)} & 1L) = 1L)"
        if isinstance(data_type, (T.DateType, T.TimestampNTZType, T.TimestampType, T.TimeType)):
            return self._date_time(data_type, path, coords)
        if isinstance(data_type, T.NullType):
            return "NULL"
        if isinstance(data_type, T.ArrayType):
            return self._array(data_type, path, coords)
        if isinstance(data_type, T.MapType):
            return self._map(data_type, path, coords)
        if isinstance(data_type, T.StructType):
            return self._struct(data_type, path, coords)
        raise ValueError(f"FakeSource cannot generate values of type {data_type.simpleString()}")

    # -- randomness -------------------------------------------------------------------------
    @staticmethod
    def _hash(path: str, coords: list[str], draw: int = 0) -> str:
        """A 64-bit hash of the coordinates, seeded per field path and per draw."""
        seed = zlib.crc32(f"{path}#{draw}".encode()) & 0x7FFFFFFF
        return f"xxhash64({', '.join(coords)}, {seed})"

    def _pick(self, values: list[str], path: str, coords: list[str], draw: int = 0) -> str:
        index = f"CAST(pmod({self._hash(path, coords, draw)}, {len(values)}L) AS INT) + 1"
        return f"element_at(array({', '.join(values)}), {index})"

    # -- scalars -------------------------------------------------------------------------------
    def _integer(self, name: str, data_type: T.DataType, path: str, coords: list[str]) -> str:
        spec = self.settings.integers[name]
        target = sql_type(data_type)
        if spec.template:
            return self._pick([f"CAST({v} AS {target})" for v in spec.template], path, coords)
        # SeaTunnel draws from [min, max): max itself only when min == max.
        high = spec.high - 1 if spec.high > spec.low else spec.high
        value = _long_in_range(self._hash(path, coords), spec.low, high)
        return value if name == "bigint" else f"CAST({value} AS {target})"

    def _fraction(self, data_type: T.DataType, path: str, coords: list[str]) -> str:
        name = "float" if isinstance(data_type, T.FloatType) else "double"
        spec = self.settings.fractions[name]
        if spec.template:
            value = self._pick([double_lit(v) for v in spec.template], path, coords)
        else:
            unit = f"(({self._hash(path, coords)} & {_UNIT - 1}L) / {double_lit(float(_UNIT))})"
            value = _scale(unit, spec.low, spec.high)
        return f"CAST({value} AS FLOAT)" if name == "float" else value

    def _decimal(self, data_type: T.DecimalType, path: str, coords: list[str]) -> str:
        whole = data_type.precision - data_type.scale
        parts = [self._digits(whole, path, coords, 0) if whole else "'0'"]
        if data_type.scale:
            parts += ["'.'", self._digits(data_type.scale, path, coords, 1000)]
        return f"CAST(concat({', '.join(parts)}) AS {sql_type(data_type)})"

    def _digits(self, count: int, path: str, coords: list[str], first_draw: int) -> str:
        chunks = []
        for i, start in enumerate(range(0, count, _DIGIT_CHUNK)):
            width = min(_DIGIT_CHUNK, count - start)
            number = f"pmod({self._hash(path, coords, first_draw + i)}, {10 ** width}L)"
            chunks.append(f"lpad(CAST({number} AS STRING), {width}, '0')")
        return chunks[0] if len(chunks) == 1 else f"concat({', '.join(chunks)})"

    def _string(self, path: str, coords: list[str]) -> str:
        if self.settings.string_template:
            return self._pick([string_lit(s) for s in self.settings.string_template], path, coords)
        return self._letters(self.settings.string_length, path, coords)

    def _letters(self, length: int, path: str, coords: list[str], binary: bool = False) -> str:
        """``length`` random ASCII letters (SeaTunnel's strings and bytes are alphabetic)."""
        chunks = []
        for i, start in enumerate(range(0, length, _LETTER_CHUNK)):
            width = min(_LETTER_CHUNK, length - start)
            code = f"(({self._hash(path, coords, i)} & {long_lit(_LETTER_MASK)}) + {long_lit(_LETTER_BASE)})"
            # hex() of the 7-letter code is exactly 14 digits (its top byte is >= 0x41);
            # unhex() turns them back into the 7 bytes, which are the letters.
            chunks.append(f"substr(unhex(hex({code})), 1, {width})")
        if not chunks:
            return "X''" if binary else "''"
        joined = chunks[0] if len(chunks) == 1 else f"concat({', '.join(chunks)})"
        return joined if binary else f"CAST({joined} AS STRING)"

    def _date_time(self, data_type: T.DataType, path: str, coords: list[str]) -> str:
        parts = self.settings.date_parts
        defaults = {"year": None, "month": (1, 12), "day": (1, 28), "hour": (0, 23),
                    "minute": (0, 59), "second": (0, 59)}
        values = {}
        for draw, (part, span) in enumerate(defaults.items()):
            template = parts.get(part)
            if template:
                values[part] = self._pick([str(v) for v in template], path, coords, draw)
            elif span is None:
                values[part] = str(DEFAULT_YEAR)
            else:
                values[part] = _long_in_range(self._hash(path, coords, draw), *span)
        if any(day > 28 for day in parts.get("day") or ()):
            # Day 31 does not exist in every month: keep to the month's last day.
            first = f"make_date({values['year']}, {values['month']}, 1)"
            values["day"] = f"least({values['day']}, day(last_day({first})))"
        y, mo, d, h, mi, s = (f"CAST({values[p]} AS INT)" for p in defaults)
        if isinstance(data_type, T.DateType):
            return f"make_date({y}, {mo}, {d})"
        if isinstance(data_type, T.TimeType):
            return f"make_time({h}, {mi}, CAST({s} AS DECIMAL(16, 6)))"
        maker = "make_timestamp_ntz" if isinstance(data_type, T.TimestampNTZType) else "make_timestamp"
        return f"{maker}({y}, {mo}, {d}, {h}, {mi}, {s})"

    # -- nested ----------------------------------------------------------------------------
    def _elements(self, size: int, element: T.DataType, path: str, coords: list[str]) -> str:
        if size == 0:
            return f"CAST(array() AS ARRAY<{sql_type(element)}>)"
        var = f"__e{len(coords) - 1}"
        body = self._value(element, path, coords + [var])
        return f"transform(sequence(0, {size - 1}), {var} -> {body})"

    def _array(self, data_type: T.ArrayType, path: str, coords: list[str]) -> str:
        return self._elements(self.settings.array_size, data_type.elementType, path + "[]", coords)

    def _map(self, data_type: T.MapType, path: str, coords: list[str]) -> str:
        size = self.settings.map_size
        if size == 0:
            return f"CAST(map() AS {sql_type(data_type)})"
        keys = self._elements(size, data_type.keyType, path + "{key}", coords)
        values = self._elements(size, data_type.valueType, path + "{value}", coords)
        # Generated keys may repeat (a tinyint has 128 values): keep the first of each,
        # as SeaTunnel's HashMap does, instead of failing on a duplicate key.
        return (f"map_from_arrays(array_distinct({keys}), "
                f"slice({values}, 1, size(array_distinct({keys}))))")

    def _struct(self, data_type: T.StructType, path: str, coords: list[str]) -> str:
        parts = []
        for f in data_type.fields:
            parts += [string_lit(f.name), self._value(f.dataType, f"{path}.{f.name}", coords)]
        return f"named_struct({', '.join(parts)})"


def _long_in_range(hash_sql: str, low: int, high: int) -> str:
    """A bigint uniformly (up to modulo bias) in [low, high], from a 64-bit hash."""
    span = high - low + 1
    if span == 1:
        return long_lit(low)
    if span == 1 << 64:
        return hash_sql
    if span & (span - 1) == 0 and span <= 1 << 63:
        picked = f"({hash_sql} & {long_lit(span - 1)})"
    elif span <= LONG_MAX:
        picked = f"pmod({hash_sql}, {long_lit(span)})"
    else:  # wider than a bigint can count: do the arithmetic in decimal
        offset = f"CAST({hash_sql} AS DECIMAL(20, 0)) + 9223372036854775808BD"
        return f"CAST({low}BD + pmod({offset}, {span}BD) AS BIGINT)"
    return picked if low == 0 else f"({long_lit(low)} + {picked})"


def _scale(unit_sql: str, low: float, high: float) -> str:
    """low + (high - low) * unit, written so that a range wider than a double still works."""
    if low == high:
        return double_lit(low)
    width = high - low
    if width != float("inf"):
        base = "" if low == 0 else f"{double_lit(low)} + "
        return f"({base}{double_lit(width)} * {unit_sql})"
    return f"({double_lit(low)} * (1.0D - {unit_sql}) + {double_lit(high)} * {unit_sql})"
