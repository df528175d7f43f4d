"""Tables holding every type SeaTunnel's PostgreSQL and MySQL pages list, and the ones SeaTide adds.

Each column is (DDL type, SQL literal, SeaTunnel type the Jdbc source gives, the value it gives).
The Jdbc source type tests, the copy tests (PostgreSQL and MariaDB, both ways) and the CDC type
tests share them, so that every path is checked against the same list.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
from decimal import Decimal

UUID = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
# PostgreSQL types made for the tests (an enum, domains); created once per database by pg_extras()
MOOD, POSINT, SHORTV = "seatide_test_mood", "seatide_test_posint", "seatide_test_shortv"

PG_COLUMNS = {
    # SeaTunnel's PostgreSQL page
    "b": ("bool", "true", "boolean", True),
    "ab": ("bool[]", "'{true,false}'", "array<boolean>", [True, False]),
    "by": ("bytea", "'\\x0102'::bytea", "bytes", b"\x01\x02"),
    "aby": ("bytea[]", "ARRAY['\\x01'::bytea]", "array<bytes>", [b"\x01"]),
    "i2": ("int2", "-3", "smallint", -3),
    "ss": ("smallserial", "default", "smallint", 1),
    "ai2": ("int2[]", "'{4,5}'", "array<smallint>", [4, 5]),
    "i4": ("int4", "2147483647", "int", 2147483647),
    "se": ("serial", "default", "int", 1),
    "ai4": ("int4[]", "'{1,2}'", "array<int>", [1, 2]),
    "i8": ("int8", "-9000000000", "bigint", -9000000000),
    "bs": ("bigserial", "default", "bigint", 1),
    "ai8": ("int8[]", "'{3}'", "array<bigint>", [3]),
    "f4": ("float4", "1.5", "float", 1.5),
    "af4": ("float4[]", "'{2.5}'", "array<float>", [2.5]),
    "f8": ("float8", "2.25", "double", 2.25),
    "af8": ("float8[]", "'{3.5}'", "array<double>", [3.5]),
    "n": ("numeric(10,3)", "12.345", "decimal(10,3)", Decimal("12.345")),
    "nn": ("numeric", "99.5", "decimal(38,18)", Decimal("99.5")),
    "c": ("char(3)", "'ab'", "string", "ab "),
    "ch": ("character(2)", "'x'", "string", "x "),
    "v": ("varchar(10)", "'vv'", "string", "vv"),
    "t": ("text", "'tt'", "string", "tt"),
    "at": ("text[]", "'{a,b}'", "array<string>", ["a", "b"]),
    "av": ("varchar(5)[]", "'{x}'", "array<string>", ["x"]),
    "ac": ("char(2)[]", "'{y}'", "array<string>", ["y "]),
    "j": ("json", "'{\"a\":1}'", "string", '{"a":1}'),
    "jb": ("jsonb", "'{\"b\": 2}'", "string", '{"b": 2}'),
    "u": ("uuid", f"'{UUID}'", "string", UUID),
    "geo": ("geometry(Point,4326)", "ST_GeomFromText('POINT(1 2)', 4326)", "string", "SRID=4326;POINT(1 2)"),
    "gpl": ("geometry(Polygon,3857)", "ST_GeomFromText('POLYGON((0 0,0 1.5,1 1,0 0))', 3857)", "string",
            "SRID=3857;POLYGON((0 0,0 1.5,1 1,0 0))"),
    "gml": ("geometry", "ST_GeomFromText('MULTILINESTRING((0 0,1 1),(2 2,3 3))')", "string",
            "MULTILINESTRING((0 0,1 1),(2 2,3 3))"),
    "gg": ("geography(Point,4326)", "'SRID=4326;POINT(-122.3452 47.5925)'", "string",
           "SRID=4326;POINT(-122.3452 47.5925)"),
    "ts": ("timestamp(3)", "'2024-01-02 03:04:05.123'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 123000)),
    "tz": ("timestamptz", "'2024-01-02 03:04:05.5+02'", "timestamp", dt.datetime(2024, 1, 2, 1, 4, 5, 500000)),
    "tm": ("time", "'10:11:12.5'", "time", dt.time(10, 11, 12, 500000)),
    "tt": ("timetz", "'10:11:12+03'", "time", dt.time(7, 11, 12)),
    "d": ("date", "'2024-02-29'", "date", dt.date(2024, 2, 29)),
    # what the issue adds: carried as SeaTunnel does (money as decimal(30,2), the rest as STRING)
    "pt": ("point", "'(1,2)'", "string", "(1,2)"),
    "ln": ("line", "'{1,-1,0}'", "string", "{1,-1,0}"),
    "lsg": ("lseg", "'[(0,0),(1,1)]'", "string", "[(0,0),(1,1)]"),
    "bx": ("box", "'(1,1),(0,0)'", "string", "(1,1),(0,0)"),
    "pa": ("path", "'[(0,0),(1,1)]'", "string", "[(0,0),(1,1)]"),
    "pgn": ("polygon", "'((0,0),(1,1),(1,0))'", "string", "((0,0),(1,1),(1,0))"),
    "ci": ("circle", "'<(0,0),2>'", "string", "<(0,0),2>"),
    "x": ("xml", "'<a>1</a>'", "string", "<a>1</a>"),
    "ip": ("inet", "'192.168.0.1/24'", "string", "192.168.0.1/24"),
    "cd": ("cidr", "'10.0.0.0/8'", "string", "10.0.0.0/8"),
    "mac": ("macaddr", "'08:00:2b:01:02:03'", "string", "08:00:2b:01:02:03"),
    "m8": ("macaddr8", "'08:00:2b:01:02:03:04:05'", "string", "08:00:2b:01:02:03:04:05"),
    "mo": ("money", "1234.56", "decimal(30,2)", Decimal("1234.56")),
    "iv": ("interval", "'1 day 02:03:04'", "string", "1 day 02:03:04"),
    "bt": ("bit(3)", "B'101'", "string", "101"),
    "b1": ("bit(1)", "B'1'", "string", "1"),
    "vbt": ("varbit(5)", "B'11'", "string", "11"),
    "tsv": ("tsvector", "'a fat cat'", "string", "'a' 'cat' 'fat'"),
    "en": (MOOD, "'ok'", "string", "ok"),
    "dm": (POSINT, "3", "int", 3),
    "dv": (SHORTV, "'short'", "string", "short"),
    "an": ("numeric(5,2)[]", "'{1.5,2}'", "array<decimal(5,2)>", [Decimal("1.50"), Decimal("2.00")]),
    "ad": ("date[]", "'{2024-01-01}'", "array<date>", [dt.date(2024, 1, 1)]),
    "ats": ("timestamp[]", "'{\"2024-01-01 10:00:00\"}'", "array<timestamp>", [dt.datetime(2024, 1, 1, 10)]),
    "au": ("uuid[]", f"'{{{UUID}}}'", "string", f"{{{UUID}}}"),
    "ae": (f"{MOOD}[]", "'{ok,sad}'", "string", "{ok,sad}"),
    "rg": ("int4range", "'[1,5)'", "string", "[1,5)"),
}

# The test's own PostgreSQL types, which another database cannot be expected to have: a table the
# Jdbc sink creates declares them as the type that carries them (an enum's text) or as their base
# type (a domain).
PG_NOT_PORTABLE = {"en": "text", "ae": "text", "dm": "integer", "dv": "character varying(7)"}

MY_COLUMNS = {
    "b1": ("bit(1)", "b'1'", "boolean", True),
    "t1": ("tinyint(1)", "1", "boolean", True),
    "t": ("tinyint", "-3", "tinyint", -3),
    "tu": ("tinyint unsigned", "200", "smallint", 200),
    "s": ("smallint", "-300", "smallint", -300),
    "su": ("smallint unsigned", "60000", "int", 60000),
    "m": ("mediumint", "-70000", "int", -70000),
    "mu": ("mediumint unsigned", "16000000", "int", 16000000),
    "i": ("int", "-5", "int", -5),
    "ig": ("integer", "6", "int", 6),
    "y": ("year", "2024", "int", 2024),
    "iu": ("int unsigned", "4000000000", "bigint", 4000000000),
    "bg": ("bigint", "-6", "bigint", -6),
    "bgu": ("bigint unsigned", "18446744073709551615", "decimal(20,0)", Decimal("18446744073709551615")),
    "dc": ("decimal(10,2)", "12.34", "decimal(10,2)", Decimal("12.34")),
    "dcu": ("decimal(10,2) unsigned", "5.5", "decimal(11,2)", Decimal("5.50")),
    "f": ("float", "1.5", "float", 1.5),
    "fu": ("float unsigned", "2.5", "float", 2.5),
    "db": ("double", "3.25", "double", 3.25),
    "du": ("double unsigned", "4.25", "double", 4.25),
    "c": ("char(3)", "'ab'", "string", "ab"),
    "v": ("varchar(10)", "'vv'", "string", "vv"),
    "tt": ("tinytext", "'a'", "string", "a"),
    "mt": ("mediumtext", "'b'", "string", "b"),
    "tx": ("text", "'c'", "string", "c"),
    "lt": ("longtext", "'d'", "string", "d"),
    "j": ("json", "'{\"k\": 1}'", "string", '{"k": 1}'),
    "e": ("enum('x','y')", "'y'", "string", "y"),
    "st": ("set('p','q','r')", "'p,r'", "string", "p,r"),
    "d": ("date", "'2024-02-29'", "date", dt.date(2024, 2, 29)),
    "tm": ("time(3)", "'10:11:12.345'", "time", dt.time(10, 11, 12, 345000)),
    "dt": ("datetime(3)", "'2024-01-02 03:04:05.678'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 678000)),
    "ts": ("timestamp(6) null", "'2024-01-02 03:04:05.123456'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    "tb": ("tinyblob", "'x'", "bytes", b"x"),
    "mb": ("mediumblob", "x'00ff80'", "bytes", b"\x00\xff\x80"),
    "bl": ("blob", "'z'", "bytes", b"z"),
    "lb": ("longblob", "'w'", "bytes", b"w"),
    "bn": ("binary(2)", "'ab'", "bytes", b"ab"),
    "vb": ("varbinary(4)", "'cd'", "bytes", b"cd"),
    "b16": ("bit(16)", "b'0000000100000010'", "bytes", b"\x01\x02"),
    "g": ("geometry", "ST_GeomFromText('POINT(1 1)')", "bytes",
          b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 6 + b"\xf0?" + b"\x00" * 6 + b"\xf0?"),
    "gp": ("point", "ST_GeomFromText('POINT(1 1)')", "bytes",
           b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 6 + b"\xf0?" + b"\x00" * 6 + b"\xf0?"),
    "gl": ("linestring", "ST_GeomFromText('LINESTRING(0 0,1 1)')", "bytes", None),
    "gpo": ("polygon", "ST_GeomFromText('POLYGON((0 0,0 1,1 1,0 0))')", "bytes", None),
    "gmp": ("multipoint", "ST_GeomFromText('MULTIPOINT(0 0,1 1)')", "bytes", None),
    "gml": ("multilinestring", "ST_GeomFromText('MULTILINESTRING((0 0,1 1))')", "bytes", None),
    "gmy": ("multipolygon", "ST_GeomFromText('MULTIPOLYGON(((0 0,0 1,1 1,0 0)))')", "bytes", None),
    "gc": ("geometrycollection", "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1))')", "bytes", None),
}
# None above: the value is the server's own binary form; tests compare it with what the server returns.


def pg_extras(conn) -> None:
    """PostGIS, an enum and two domains in the connected database (idempotent, safe in parallel)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(7262343)")   # two test processes may get here at once
        conn.execute("CREATE EXTENSION IF NOT EXISTS postgis")
        for name, ddl in ((MOOD, f"CREATE TYPE {MOOD} AS ENUM ('sad', 'ok')"),
                          (POSINT, f"CREATE DOMAIN {POSINT} AS int CHECK (VALUE > 0)"),
                          (SHORTV, f"CREATE DOMAIN {SHORTV} AS varchar(7)")):
            if conn.execute("SELECT to_regtype(%s)", (name,)).fetchone()[0] is None:
                conn.execute(ddl)


# How two PostgreSQL values are compared: by their text form (exact for every type here, also
# those without an equality operator: json, xml, point), except where SeaTunnel's type keeps the
# value but not its form: an unconstrained numeric travels as decimal(38,18) (99.5 comes back as
# 99.500000000000000000, an equal number) and a timetz as its UTC time of day.
COMPARED_AS = {"nn": "{c}::numeric", "tt": "timezone('UTC', {c})::text"}


def pg_differences(conn, source: str, copy: str, columns) -> dict:
    """Column -> rows (id, source value, copy value) where two PostgreSQL tables differ."""
    wrong = {}
    for column in ("id", *columns):
        form = COMPARED_AS.get(column, "{c}::text")
        left, right = form.format(c=f"s.{column}"), form.format(c=f"c.{column}")
        rows = conn.execute(f"SELECT s.id, {left}, {right} FROM {source} s FULL JOIN {copy} c "
                            f"USING (id) WHERE {left} IS DISTINCT FROM {right}").fetchall()
        if rows:
            wrong[column] = rows
    return wrong


def my_differences(cursor, source: str, copy: str, columns) -> dict:
    """Column -> rows (id, source value, copy value) where two MySQL tables differ (<=>)."""
    wrong = {}
    for column in ("id", *columns):
        cursor.execute(f"SELECT s.id, s.{column}, c.{column} FROM {source} s LEFT JOIN {copy} c USING (id) "
                       f"WHERE NOT (s.{column} <=> c.{column})")
        rows = cursor.fetchall()
        cursor.execute(f"SELECT count(*) FROM {copy} c LEFT JOIN {source} s USING (id) WHERE s.id IS NULL")
        extra = cursor.fetchone()[0]
        if rows or (column == "id" and extra):
            wrong[column] = rows or f"{extra} rows only in {copy}"
    return wrong


def read_back(spark, url: str, user: str, table: str) -> dict:
    """The table's rows as the Jdbc source gives them (SeaTunnel values), by id."""
    from seatide.config.loader import load_job_text
    from seatide.plugin.base import ReadContext
    from seatide.plugin.rowkind import ROW_KIND_COLUMN

    job = load_job_text(f'source {{ Jdbc {{ url = "{url}", user = "{user}", table_path = "{table}" }} }}\n'
                        'sink { Console {} }')
    df = job.sources[0].plugin.read(ReadContext(spark, micro_batch=False, unbounded=False, parallelism=1,
                                                max_rows_per_batch=100, read_interval_ms=1000, plugin_id="s"))
    return {row.id: {k: v for k, v in row.asDict().items() if k != ROW_KIND_COLUMN} for row in df.collect()}


def as_carried(value):
    """A SeaTunnel array as it comes back from MySQL, which has no arrays: its JSON text (decimals
    as numbers, bytes in base64, times in ISO form to the microsecond), parsed."""
    def element(v):
        if isinstance(v, (bytes, bytearray)):
            return base64.b64encode(bytes(v)).decode()
        if isinstance(v, Decimal):
            return float(v)
        if isinstance(v, dt.datetime):
            return v.isoformat(timespec="microseconds")
        if isinstance(v, dt.date):
            return v.isoformat()
        return v
    return [element(v) for v in value] if isinstance(value, list) else value


def same_values(expected: dict, actual: dict, json_columns=()) -> dict:
    """(id, column) -> (expected, actual) where two read_back() results differ; ``json_columns``
    hold arrays that went through MySQL as JSON text."""
    wrong = {}
    for key, row in expected.items():
        for column, value in row.items():
            got = actual.get(key, {}).get(column)
            if column in json_columns and got is not None:
                got, value = json.loads(got), as_carried(value)
            if isinstance(got, bytearray):
                got = bytes(got)
            if isinstance(value, bytearray):
                value = bytes(value)
            if isinstance(value, list) and isinstance(got, list):
                value = [bytes(v) if isinstance(v, bytearray) else v for v in value]
                got = [bytes(v) if isinstance(v, bytearray) else v for v in got]
            if isinstance(value, Decimal) and isinstance(got, Decimal) and value == got:
                continue
            if got != value:
                wrong[(key, column)] = (value, got)
    return wrong


def unique(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(4)}"


def create_table(cursor, name: str, columns: dict, rows: bool = True) -> None:
    """``name`` with an id key and ``columns``: row 1 holds every literal, row 2 only nulls
    (no rows when not ``rows``)."""
    ddl = ", ".join(f"{c} {spec[0]}" for c, spec in columns.items())
    cursor.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, {ddl})")
    if rows:
        insert_rows(cursor, name, columns, [1])
        cursor.execute(f"INSERT INTO {name} (id) VALUES (2)")


def change_rows(cursor, name: str, columns: dict) -> None:
    """Changes of every kind to a table ``create_table`` made: rows 3 and 4 inserted, row 2's
    nulls all set to values, row 1 deleted."""
    insert_rows(cursor, name, columns, [3, 4])
    values = ", ".join(f"{c} = {spec[1]}" for c, spec in columns.items() if spec[1] != "default")
    cursor.execute(f"UPDATE {name} SET {values} WHERE id = 2")
    cursor.execute(f"DELETE FROM {name} WHERE id = 1")


def insert_rows(cursor, name: str, columns: dict, ids) -> None:
    values = ", ".join(spec[1] for spec in columns.values())
    for i in ids:
        cursor.execute(f"INSERT INTO {name} (id, {', '.join(columns)}) VALUES ({i}, {values})")


__all__ = ["COMPARED_AS", "MOOD", "MY_COLUMNS", "PG_COLUMNS", "PG_NOT_PORTABLE", "POSINT", "SHORTV", "change_rows", "create_table", "insert_rows",
           "my_differences", "pg_differences", "pg_extras", "read_back", "same_values", "unique"]
