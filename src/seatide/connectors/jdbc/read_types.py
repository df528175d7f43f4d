"""Database column types -> SeaTunnel's types (as Spark types), for the Jdbc source.

The mapping follows SeaTunnel's tables for PostgreSQL and MySQL/MariaDB. It is decided
once, on the driver, from the native client's description of the query's columns
(``discover``). Both read paths then deliver exactly these types:

* Spark's JDBC reader has its own mapping; ``ReadColumn.spark_expr`` turns the column it
  returns into the SeaTunnel type where the two differ (a cast, or a small expression).
* the split-by-split reader converts the native client's Python values with the named
  ``convert`` step (see ``split_reader.CONVERTERS``) before building Arrow arrays.

Some columns are fixed in the database instead (``db_expr``): Spark cannot recover the
bytes of a MySQL BIT(n) from what the driver hands it, so the query casts it to BINARY.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import types as T

from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL


class UnsupportedColumnType(ValueError):
    """A column whose database type has no SeaTunnel counterpart; the message names it."""


@dataclass(frozen=True)
class ReadColumn:
    name: str
    db_type: str                  # the database's own name for the type (messages, docs)
    spark_type: T.DataType        # SeaTunnel's type for it
    convert: str | None = None    # native value -> Spark value step, None when pyarrow takes it as is
    db_expr: str | None = None    # select-list expression over the quoted column, None: the column
    spark_fix: str | None = None  # Spark SQL over Spark's JDBC column ({c}) where a cast is not enough


def quote(dialect: str, name: str) -> str:
    if dialect == MYSQL:
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def select_list(dialect: str, columns: list[ReadColumn]) -> str:
    parts = []
    for column in columns:
        quoted = quote(dialect, column.name)
        parts.append(f"{column.db_expr.format(c=quoted)} AS {quoted}" if column.db_expr else quoted)
    return ", ".join(parts)


def spark_column(column: ReadColumn, spark_type: T.DataType) -> str:
    """Spark SQL giving SeaTunnel's value from Spark's JDBC reader column of ``spark_type``."""
    name = "`" + column.name.replace("`", "``") + "`"
    if column.spark_fix:
        return f"{column.spark_fix.format(c=name)} AS {name}"
    if spark_type == column.spark_type:
        return name
    return f"CAST({name} AS {column.spark_type.simpleString()}) AS {name}"


# -- PostgreSQL: psycopg's type OIDs --------------------------------------------------------
_PG_SCALARS: dict[int, tuple[str, T.DataType, str | None]] = {
    16: ("bool", T.BooleanType(), None),
    17: ("bytea", T.BinaryType(), None),
    21: ("int2", T.ShortType(), None),
    23: ("int4", T.IntegerType(), None),
    20: ("int8", T.LongType(), None),
    700: ("float4", T.FloatType(), None),
    701: ("float8", T.DoubleType(), None),
    1042: ("bpchar", T.StringType(), None),
    1043: ("varchar", T.StringType(), None),
    25: ("text", T.StringType(), None),
    19: ("name", T.StringType(), None),
    114: ("json", T.StringType(), None),        # psycopg is told to load these as text
    3802: ("jsonb", T.StringType(), None),
    2950: ("uuid", T.StringType(), None),
    1114: ("timestamp", T.TimestampNTZType(), None),
    1184: ("timestamptz", T.TimestampNTZType(), "utc_wall_time"),
    1083: ("time", T.TimeType(6), None),
    1266: ("timetz", T.TimeType(6), "utc_time_of_day"),
    1082: ("date", T.DateType(), None),
}
# array OID -> element OID
_PG_ARRAYS = {1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1021: 700, 1022: 701,
              1014: 1042, 1015: 1043, 1009: 25}
_PG_TEXT_BY_NAME = ("geometry", "geography")   # PostGIS types have no fixed OID
NUMERIC_OID = 1700
DEFAULT_DECIMAL = T.DecimalType(38, 18)
# psycopg OIDs whose values are loaded as plain text, so that they arrive as SeaTunnel strings
PG_TEXT_OIDS = (114, 3802, 2950)


def postgres_column(name: str, oid: int, display: str, precision: int | None, scale: int | None) -> ReadColumn:
    if oid == NUMERIC_OID:
        if precision and precision <= 38:
            return ReadColumn(name, display, T.DecimalType(precision, scale or 0))
        return ReadColumn(name, display, DEFAULT_DECIMAL, "decimal_38_18")
    if oid in _PG_SCALARS:
        db_name, spark_type, convert = _PG_SCALARS[oid]
        return ReadColumn(name, display, spark_type, convert,
                          spark_fix="CAST({c} AS TIME(6))" if convert == "utc_time_of_day" else None)
    if oid in _PG_ARRAYS:
        _, element, _ = _PG_SCALARS[_PG_ARRAYS[oid]]
        return ReadColumn(name, display, T.ArrayType(element))
    if display.split("(")[0].lower() in _PG_TEXT_BY_NAME:
        return ReadColumn(name, display, T.StringType(), "text", db_expr="ST_AsText({c})")
    raise UnsupportedColumnType(
        f"column '{name}' has PostgreSQL type {display}, which has no SeaTunnel type; cast it in "
        "`query` to one that has (e.g. CAST(col AS text))")


# -- MySQL / MariaDB: PyMySQL's field descriptions ----------------------------------------
_UNSIGNED = 32
_BINARY_CHARSET = 63
_STRING_TYPES = {15: "varchar", 253: "varchar", 254: "char", 245: "json", 247: "enum", 248: "set",
                 249: "tinytext", 250: "mediumtext", 251: "longtext", 252: "text"}
_ENUM_FLAG, _SET_FLAG = 256, 2048


def mysql_column(name: str, type_code: int, length: int, scale: int, flags: int, charset: int) -> ReadColumn:
    unsigned = bool(flags & _UNSIGNED)
    suffix = " unsigned" if unsigned else ""
    if type_code == 16:                                   # BIT(n)
        if length == 1:
            return ReadColumn(name, "bit(1)", T.BooleanType(), "bit_to_bool")
        return ReadColumn(name, f"bit({length})", T.BinaryType(), db_expr="CAST({c} AS BINARY)")
    if type_code == 1:                                    # TINYINT
        if length == 1 and not unsigned:
            return ReadColumn(name, "tinyint(1)", T.BooleanType(), "int_to_bool")
        return ReadColumn(name, "tinyint" + suffix, T.ShortType() if unsigned else T.ByteType())
    if type_code == 2:
        return ReadColumn(name, "smallint" + suffix, T.IntegerType() if unsigned else T.ShortType())
    if type_code == 9:
        return ReadColumn(name, "mediumint" + suffix, T.IntegerType())
    if type_code == 3:
        return ReadColumn(name, "int" + suffix, T.LongType() if unsigned else T.IntegerType())
    if type_code == 8:
        if unsigned:
            return ReadColumn(name, "bigint unsigned", T.DecimalType(20, 0), "int_to_decimal")
        return ReadColumn(name, "bigint", T.LongType())
    if type_code == 13:
        return ReadColumn(name, "year", T.IntegerType(), spark_fix="year({c})")
    if type_code in (0, 246):
        # The reported length is the display width: digits, plus a point, plus a sign.
        precision = length - (1 if scale else 0) - (0 if unsigned else 1)
        if unsigned:
            precision += 1                                # SeaTunnel widens unsigned decimals by one
        if precision > 38:
            return ReadColumn(name, f"decimal({length},{scale}){suffix}", DEFAULT_DECIMAL, "decimal_38_18")
        return ReadColumn(name, f"decimal{suffix}", T.DecimalType(max(1, precision), scale))
    if type_code == 4:
        return ReadColumn(name, "float" + suffix, T.FloatType())
    if type_code == 5:
        return ReadColumn(name, "double" + suffix, T.DoubleType())
    if type_code in (10, 14):
        return ReadColumn(name, "date", T.DateType())
    if type_code == 11:
        return ReadColumn(name, "time", T.TimeType(6), "timedelta_to_time",
                          spark_fix="CAST({c} AS TIME(6))")
    if type_code in (7, 12):
        return ReadColumn(name, "timestamp" if type_code == 7 else "datetime", T.TimestampNTZType())
    if type_code == 255:
        return ReadColumn(name, "geometry", T.BinaryType())
    if type_code in _STRING_TYPES:
        kind = _STRING_TYPES[type_code]
        if charset == _BINARY_CHARSET and not flags & (_ENUM_FLAG | _SET_FLAG):
            return ReadColumn(name, "binary/blob", T.BinaryType())
        # MySQL drops a CHAR's trailing spaces when it returns it; Spark pads CHAR(n) back.
        fix = "rtrim({c})" if kind == "char" and not flags & (_ENUM_FLAG | _SET_FLAG) else None
        return ReadColumn(name, kind, T.StringType(), spark_fix=fix)
    raise UnsupportedColumnType(
        f"column '{name}' has a MySQL type (code {type_code}) that has no SeaTunnel type; cast it "
        "in `query` to one that has")


def describe(url, user: str | None, password: str | None, sql: str) -> list[ReadColumn]:
    """The SeaTunnel type of each column ``sql`` returns, asked of the database (no rows read)."""
    probe = f"SELECT * FROM ({sql}) seatide_probe WHERE 1 = 0"
    with url.connect(user, password, autocommit=True) as conn:
        if url.dialect == POSTGRESQL:
            cursor = conn.execute(probe)
            return [postgres_column(d.name, d.type_code, d.type_display, d.precision, d.scale)
                    for d in cursor.description]
        with conn.cursor() as cursor:
            cursor.execute(probe)
            return [mysql_column(f.name, f.type_code, f.length, f.scale, f.flags, f.charsetnr)
                    for f in cursor._result.fields]


__all__ = ["ReadColumn", "UnsupportedColumnType", "describe", "mysql_column", "postgres_column",
           "quote", "select_list", "spark_column", "PG_TEXT_OIDS"]
