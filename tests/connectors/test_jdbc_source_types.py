"""Jdbc source read types: every PostgreSQL and MySQL/MariaDB type of SeaTunnel's tables arrives
as SeaTunnel's type with the same value, through Spark's JDBC reader and the split reader alike."""

from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal

import pytest

from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.types import type_name

PG_URL = "jdbc:postgresql://127.0.0.1:5432/test?user=postgres"
MY_URL = "jdbc:mariadb://127.0.0.1:3306/test?user=root"

# column -> (DDL type, SQL literal, SeaTunnel type, expected value)
PG_COLUMNS = {
    "b": ("bool", "true", "boolean", True),
    "ab": ("bool[]", "'{true,false}'", "array<boolean>", [True, False]),
    "by": ("bytea", "'\\x0102'::bytea", "bytes", b"\x01\x02"),
    "aby": ("bytea[]", "ARRAY['\\x01'::bytea]", "array<bytes>", [b"\x01"]),
    "i2": ("int2", "-3", "smallint", -3),
    "ss": ("smallserial", "default", "smallint", 1),
    "ai2": ("int2[]", "'{4,5}'", "array<smallint>", [4, 5]),
    "i4": ("int4", "2147483647", "int", 2147483647),
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
    "v": ("varchar(10)", "'vv'", "string", "vv"),
    "t": ("text", "'tt'", "string", "tt"),
    "at": ("text[]", "'{a,b}'", "array<string>", ["a", "b"]),
    "av": ("varchar(5)[]", "'{x}'", "array<string>", ["x"]),
    "j": ("json", "'{\"a\":1}'", "string", '{"a":1}'),
    "jb": ("jsonb", "'{\"b\": 2}'", "string", '{"b": 2}'),
    "u": ("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "string", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    "ts": ("timestamp(3)", "'2024-01-02 03:04:05.123'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 123000)),
    "tz": ("timestamptz", "'2024-01-02 03:04:05.5+02'", "timestamp", dt.datetime(2024, 1, 2, 1, 4, 5, 500000)),
    "tm": ("time", "'10:11:12.5'", "time", dt.time(10, 11, 12, 500000)),
    "tt": ("timetz", "'10:11:12+03'", "time", dt.time(7, 11, 12)),
    "d": ("date", "'2024-02-29'", "date", dt.date(2024, 2, 29)),
}

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
    "d": ("date", "'2024-02-29'", "date", dt.date(2024, 2, 29)),
    "tm": ("time(3)", "'10:11:12.345'", "time", dt.time(10, 11, 12, 345000)),
    "dt": ("datetime(3)", "'2024-01-02 03:04:05.678'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 678000)),
    "ts": ("timestamp(6) null", "'2024-01-02 03:04:05.123456'", "timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    "tb": ("tinyblob", "'x'", "bytes", b"x"),
    "mb": ("mediumblob", "'y'", "bytes", b"y"),
    "bl": ("blob", "'z'", "bytes", b"z"),
    "lb": ("longblob", "'w'", "bytes", b"w"),
    "bn": ("binary(2)", "'ab'", "bytes", b"ab"),
    "vb": ("varbinary(4)", "'cd'", "bytes", b"cd"),
    "b16": ("bit(16)", "b'0000000100000010'", "bytes", b"\x01\x02"),
    "g": ("geometry", "ST_GeomFromText('POINT(1 1)')", "bytes",
          b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 6 + b"\xf0?" + b"\x00" * 6 + b"\xf0?"),
}


@pytest.fixture(params=["postgresql", "mariadb"])
def typed_table(request):
    url, columns = (PG_URL, PG_COLUMNS) if request.param == "postgresql" else (MY_URL, MY_COLUMNS)
    name = f"jdbc_source_types_{secrets.token_hex(4)}"
    ddl = ", ".join(f"{c} {spec[0]}" for c, spec in columns.items())
    values = ", ".join(spec[1] for spec in columns.values())
    with JdbcUrl.parse(url).connect(autocommit=True) as conn:
        cursor = conn.cursor()
        cursor.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, {ddl})")
        cursor.execute(f"INSERT INTO {name} VALUES (1, {values})")
        cursor.execute(f"INSERT INTO {name} (id) VALUES (2)")
    yield url, name, columns
    with JdbcUrl.parse(url).connect(autocommit=True) as conn:
        conn.cursor().execute(f"DROP TABLE {name}")


def test_every_listed_type_reads_as_seatunnels_type_and_value_both_ways(spark, typed_table, tmp_path):
    url, name, columns = typed_table
    job = load_job_text(f'source {{ Jdbc {{ url = "{url}", table_path = "{name}" }} }}\nsink {{ Console {{}} }}')
    source = job.sources[0].plugin
    expected_types = {"id": "int", **{c: spec[2] for c, spec in columns.items()}}
    assert {f.name: type_name(f.dataType) for f in source.schema().fields} == expected_types

    parallel = source.read(ReadContext(spark, micro_batch=False, unbounded=False, parallelism=2,
                                       max_rows_per_batch=100, read_interval_ms=1000, plugin_id="s"))
    rows: list = []
    streamed = source.read(ReadContext(spark, micro_batch=True, unbounded=False, parallelism=2,
                                       max_rows_per_batch=100, read_interval_ms=1000, plugin_id="s"))
    query = (streamed.writeStream.trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
             .foreachBatch(lambda batch, _: rows.extend(batch.collect())).start())
    query.awaitTermination()
    for label, df in (("spark", parallel.collect()), ("split reader", rows)):
        by_id = {r.id: r.asDict() for r in df}
        assert sorted(by_id) == [1, 2], label
        assert all(v is None for k, v in by_id[2].items() if k not in ("id", "ss", "bs", ROW_KIND_COLUMN)), label
        actual = by_id[1]
        for column, spec in columns.items():
            value = actual[column]
            if isinstance(spec[3], Decimal):
                assert value == spec[3], (label, column, value)
            else:
                assert value == spec[3] and type(value) is type(spec[3]), (label, column, value)
    assert [f.dataType for f in parallel.schema.fields] == [f.dataType for f in streamed.schema.fields]
