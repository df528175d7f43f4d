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

import secrets
from dataclasses import dataclass, replace

from pyspark.sql import types as T

from seatide.connectors.jdbc.url import MYSQL, POSTGRESQL
from seatide.connectors.pg_types import (EWKT, MONEY, MONEY_PRECISION, MONEY_SCALE, TEXT, PgType,
                                         carriage, column_displays, ewkt_sql, is_portable, lookup, refusal)


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
    source_type: str | None = None   # the column's type as the database declares it, when a table of
                                     # the same kind of database can be created with it (see dialect.py)


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


# -- PostgreSQL: decided from pg_type (seatide.connectors.pg_types) -------------------------
_PG_SCALARS: dict[str, tuple[T.DataType, str | None]] = {
    "bool": (T.BooleanType(), None),
    "bytea": (T.BinaryType(), None),
    "int2": (T.ShortType(), None),
    "int4": (T.IntegerType(), None),
    "int8": (T.LongType(), None),
    "float4": (T.FloatType(), None),
    "float8": (T.DoubleType(), None),
    "bpchar": (T.StringType(), None),
    "varchar": (T.StringType(), None),
    "text": (T.StringType(), None),
    "name": (T.StringType(), None),
    "timestamp": (T.TimestampNTZType(), None),
    "timestamptz": (T.TimestampNTZType(), "utc_wall_time"),
    "time": (T.TimeType(6), None),
    "timetz": (T.TimeType(6), "utc_time_of_day"),
    "date": (T.DateType(), None),
}
DEFAULT_DECIMAL = T.DecimalType(38, 18)
# psycopg OIDs whose values are loaded as plain text (json, jsonb, uuid): the select list casts
# them to text as well, which makes this a second guard for the split reader.
PG_TEXT_OIDS = (114, 3802, 2950)


def postgres_column(name: str, pg: PgType, precision: int | None, scale: int | None,
                    display: str | None = None) -> ReadColumn:
    """``display``: the column's type with its modifiers (format_type with the typmod)."""
    display = display or pg.display
    how = carriage(pg)
    source = display if is_portable(pg) else None
    if how is None:
        raise UnsupportedColumnType(refusal(name, pg))
    if how == TEXT:
        return ReadColumn(name, display, T.StringType(), db_expr="{c}::text", source_type=source)
    if how == EWKT:
        return ReadColumn(name, display, T.StringType(), db_expr=ewkt_sql(pg), source_type=source)
    if how == MONEY:
        return ReadColumn(name, display, T.DecimalType(MONEY_PRECISION, MONEY_SCALE),
                          db_expr=f"{{c}}::numeric({MONEY_PRECISION},{MONEY_SCALE})", source_type=source)
    if pg.is_array:
        element = pg.element.name
        if element == "numeric":
            if precision and precision <= 38:
                spark = T.DecimalType(precision, scale or 0)
                return ReadColumn(name, display, T.ArrayType(spark), source_type=source)
            # unconstrained: the server rounds each element to SeaTunnel's decimal(38,18)
            return ReadColumn(name, display, T.ArrayType(DEFAULT_DECIMAL), db_expr="{c}::numeric(38,18)[]",
                              source_type=source)
        return ReadColumn(name, display, T.ArrayType(_PG_SCALARS[element][0]), source_type=source)
    if pg.name == "numeric":
        if precision and precision <= 38:
            return ReadColumn(name, display, T.DecimalType(precision, scale or 0), source_type=source)
        return ReadColumn(name, display, DEFAULT_DECIMAL, "decimal_38_18", source_type=source)
    spark_type, convert = _PG_SCALARS[pg.name]
    return ReadColumn(name, display, spark_type, convert,
                      spark_fix="CAST({c} AS TIME(6))" if convert == "utc_time_of_day" else None,
                      source_type=source)


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
        # MySQL drops a CHAR's trailing spaces when it returns it (and ENUM and SET members have
        # none: the server strips them when the column is defined); Spark pads CHAR(n) back.
        fix = "rtrim({c})" if kind == "char" else None
        return ReadColumn(name, kind, T.StringType(), spark_fix=fix)
    if type_code == 6:                                    # a NULL literal (MySQL; MariaDB says binary(0))
        return ReadColumn(name, "null", T.NullType())
    raise UnsupportedColumnType(
        f"column '{name}' has MySQL type {_MYSQL_CODE_NAMES.get(type_code, f'number {type_code}')}, which has "
        f"no SeaTunnel type; cast it in `query` to one that has, e.g. CAST({name} AS CHAR)")


# Type codes a server may name that the mapping above does not take (storage formats, MySQL 9)
_MYSQL_CODE_NAMES = {17: "TIMESTAMP2", 18: "DATETIME2", 19: "TIME2", 20: "TYPED_ARRAY", 242: "VECTOR",
                     243: "INVALID", 244: "BOOL"}


def describe(url, user: str | None, password: str | None, sql: str) -> list[ReadColumn]:
    """The SeaTunnel type of each column ``sql`` returns, asked of the database (no rows read)."""
    probe = f"SELECT * FROM ({sql}) seatide_probe WHERE 1 = 0"
    with url.connect(user, password, autocommit=True) as conn:
        if url.dialect == POSTGRESQL:
            cursor = conn.execute(probe)
            described = cursor.description
            modifiers = [cursor.pgresult.fmod(i) for i in range(len(described))]
            oids = [d.type_code for d in described]
            types = lookup(conn, oids)
            displays = column_displays(conn, oids, modifiers)
            return [postgres_column(d.name, types[d.type_code], d.precision, d.scale, display)
                    for d, display in zip(described, displays)]
        with conn.cursor() as cursor:
            cursor.execute(probe)
            fields = cursor._result.fields
            declared = _mysql_declared_types(cursor, sql)
        return [replace(mysql_column(f.name, f.type_code, f.length, f.scale, f.flags, f.charsetnr),
                        source_type=declared.get(f.name)) for f in fields]


def _mysql_declared_types(cursor, sql: str) -> dict[str, str]:
    """Column name -> the column's declared MySQL type (``int(10) unsigned``, ``set('a','b')``).

    A result set says too little for that (an ENUM's members, a display width), so the query's
    columns are copied, without rows, into a temporary table the server then describes. Without
    the privilege to create one, the types stay unknown: a table created from the rows then
    takes SeaTunnel's mapping of the Spark types."""
    import pymysql

    table = f"seatide_types_{secrets.token_hex(4)}"
    try:
        cursor.execute(f"CREATE TEMPORARY TABLE {table} AS SELECT * FROM ({sql}) seatide_probe LIMIT 0")
    except pymysql.MySQLError:
        return {}
    try:
        cursor.execute(f"SHOW COLUMNS FROM {table}")
        return {row[0]: row[1] for row in cursor.fetchall()}
    finally:
        cursor.execute(f"DROP TEMPORARY TABLE {table}")


# -- errors while describing ---------------------------------------------------------------
def is_sql_error(exc: Exception) -> bool:
    """True for an error in the SQL itself (the database answered), not for an unreachable one."""
    name = type(exc).__name__
    module = type(exc).__module__
    if module.startswith("psycopg"):
        return name not in ("OperationalError", "InterfaceError")
    if module.startswith("pymysql"):
        # PyMySQL raises OperationalError for SQL errors too; client codes (2000+) mean no connection.
        # Access denied (1044, 1045) is a login, as with psycopg: checked again where the job runs,
        # which alone may decrypt an aes256-shaded password (seatide.config.shade).
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        return name != "InterfaceError" and code < 2000 and code not in (1044, 1045)
    return False


def first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


__all__ = ["ReadColumn", "UnsupportedColumnType", "describe", "first_line", "is_sql_error", "mysql_column",
           "postgres_column", "quote", "select_list", "spark_column", "PG_TEXT_OIDS"]
