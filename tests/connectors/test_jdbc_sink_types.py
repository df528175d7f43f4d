"""Tables the Jdbc sink creates (schema_save_mode) for every SeaTunnel type, in PostgreSQL and in
MariaDB, from a source that names no column types (FakeSource): each field gets the column type
docs/types.md gives, and its value comes back. Types with no column are refused naming the field."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from seatide.connectors.jdbc.url import JdbcUrl
from tests.e2e.harness import InProcessCluster
from tests.every_type import unique

pytestmark = pytest.mark.spark

URLS = {"postgresql": ("jdbc:postgresql://127.0.0.1:5432/test", "postgres"),
        "mariadb": ("jdbc:mariadb://127.0.0.1:3306/test", "root")}

# field -> (SeaTunnel type, FakeSource value, PostgreSQL column, MariaDB column (SHOW COLUMNS), value read back)
FIELDS = {
    "id": ("bigint", "1", "bigint", "bigint(20)", 1),
    "b": ("boolean", "true", "boolean", "tinyint(1)", True),
    "ti": ("tinyint", "7", "smallint", "tinyint(4)", 7),
    "si": ("smallint", "-300", "smallint", "smallint(6)", -300),
    "i": ("int", "70000", "integer", "int(11)", 70000),
    "f": ("float", "1.5", "real", "float", 1.5),
    "d": ("double", "2.25", "double precision", "double", 2.25),
    "dc": ('"decimal(10, 2)"', '"12.34"', "numeric(10,2)", "decimal(10,2)", Decimal("12.34")),
    "s": ("string", '"héllo"', "text", "longtext", "héllo"),
    "bys": ("bytes", '"AAH/"', "bytea", "longblob", b"\x00\x01\xff"),
    "dt": ("date", '"2024-02-29"', "date", "date", dt.date(2024, 2, 29)),
    "tm": ("time", '"12:34:56.123456"', "time without time zone", "time(6)", dt.time(12, 34, 56, 123456)),
    "ts": ("timestamp", '"2024-01-02T03:04:05.678901"', "timestamp without time zone", "datetime(6)",
           dt.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    "tz": ("timestamp_tz", '"2024-01-02T03:04:05.5Z"', "timestamp with time zone", "datetime(6)",
           dt.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=dt.timezone.utc)),
    "ab": ('"array<boolean>"', "[true, false]", "boolean[]", "longtext", [True, False]),
    "ati": ('"array<tinyint>"', "[1, 2]", "smallint[]", "longtext", [1, 2]),
    "asi": ('"array<smallint>"', "[3]", "smallint[]", "longtext", [3]),
    "ai": ('"array<int>"', "[4, 5]", "integer[]", "longtext", [4, 5]),
    "abi": ('"array<bigint>"', "[6]", "bigint[]", "longtext", [6]),
    "af": ('"array<float>"', "[1.5]", "real[]", "longtext", [1.5]),
    "ad": ('"array<double>"', "[2.5]", "double precision[]", "longtext", [2.5]),
    "adc": ('"array<decimal(5, 2)>"', '["1.50"]', "numeric(5,2)[]", "longtext", [Decimal("1.50")]),
    "ast": ('"array<string>"', '["a", "b,c"]', "text[]", "longtext", ["a", "b,c"]),
    "aby": ('"array<bytes>"', '["AAE="]', "bytea[]", "longtext", [b"\x00\x01"]),
    "adt": ('"array<date>"', '["2024-01-01"]', "date[]", "longtext", [dt.date(2024, 1, 1)]),
    "ats": ('"array<timestamp>"', '["2024-01-01T10:00:00.000001"]', "timestamp without time zone[]", "longtext",
            [dt.datetime(2024, 1, 1, 10, 0, 0, 1)]),
}
# MariaDB's JSON is LONGTEXT with a json_valid check: how each array reads back from it
MY_JSON = {"ab": [True, False], "ati": [1, 2], "asi": [3], "ai": [4, 5], "abi": [6], "af": [1.5], "ad": [2.5],
           "adc": [1.5], "ast": ["a", "b,c"], "aby": ["AAE="], "adt": ["2024-01-01"],
           "ats": ["2024-01-01T10:00:00.000001"]}


def fake_to_jdbc(url: str, user: str, table: str, fields: dict) -> str:
    schema = ", ".join(f"{name} = {spec[0]}" for name, spec in fields.items())
    row = ", ".join(spec[1] for spec in fields.values())
    return (f'env {{ job.mode = BATCH\n job.retry.times = 0 }}\n'
            f'source {{ FakeSource {{ plugin_output = "rows", schema = {{ fields {{ {schema} }} }}, '
            f'rows = [{{ kind = INSERT, fields = [{row}] }}] }} }}\n'
            f'sink {{ Jdbc {{ plugin_input = "rows", url = "{url}", user = "{user}", password = "", '
            f'table = "{table}", primary_keys = ["id"] }} }}\n')


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


@pytest.fixture(params=sorted(URLS))
def target(request):
    url, user = URLS[request.param]
    table = unique("created_types")
    yield request.param, url, user, table
    with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
        conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


def test_a_created_table_has_a_column_for_every_seatunnel_type_and_the_values_come_back(local, target):
    kind, url, user, table = target
    run = local.run(fake_to_jdbc(url, user, table, FIELDS))
    assert run.status == "FINISHED", run.error
    with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
        cursor = conn.cursor()
        if kind == "postgresql":
            cursor.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                           "WHERE attrelid = %s::regclass AND attnum > 0", (table,))
        else:
            cursor.execute(f"SHOW COLUMNS FROM {table}")
        declared = {row[0]: row[1] for row in cursor.fetchall()}
        if kind == "postgresql":
            cursor.execute("SET TIME ZONE 'UTC'")
        cursor.execute(f"SELECT {', '.join(FIELDS)} FROM {table}")
        row = dict(zip(FIELDS, cursor.fetchone()))
    column = 2 if kind == "postgresql" else 3
    assert declared == {name: spec[column] for name, spec in FIELDS.items()}
    expected = {name: spec[4] for name, spec in FIELDS.items()}
    if kind == "mariadb":
        row = {k: json.loads(v) if k in MY_JSON else v for k, v in row.items()}
        expected.update(MY_JSON, b=1, tm=dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=123456),
                        tz=dt.datetime(2024, 1, 2, 3, 4, 5, 500000))   # DATETIME in UTC, the session's zone
    row = {k: bytes(v) if isinstance(v, (bytearray, memoryview)) else v for k, v in row.items()}
    row["aby"] = [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in row["aby"]]
    assert {k: v for k, v in row.items() if v != expected[k]} == {}


@pytest.mark.parametrize("field, spec", [("m", '"map<string, int>"'), ("r", "{ x = int }"), ("n", '"null"')])
def test_a_type_without_a_column_is_refused_naming_the_field(local, target, field, spec):
    kind, url, user, table = target
    value = {"m": "{ k = 1 }", "r": "[1]", "n": "null"}[field]
    run = local.run(fake_to_jdbc(url, user, table, {"id": ("bigint", "1"), field: (spec, value)}))
    assert run.status == "FAILED"
    way_out = f"CAST({field} AS string)" if field == "n" else f"to_json({field})"
    assert f"cannot create table {table}: field '{field}'" in run.error and way_out in run.error, run.error


@pytest.mark.parametrize("kind, column", [("postgresql", "json"), ("postgresql", "point"),
                                          ("mariadb", "longtext"), ("mariadb", "blob")])
def test_a_declared_type_no_key_can_have_gives_way_in_a_created_key(local, kind, column):
    # primary_keys may name a column the source had as a plain column: a json, text or blob
    # column cannot be (part of) a key, so the created key column takes SeaTunnel's mapping
    url, user = URLS[kind]
    source, created = unique("key_src"), unique("key_made")
    literal = {"json": "'{\"a\": 1}'", "point": "'(1,2)'", "longtext": "'k'", "blob": "'k'"}[column]
    try:
        with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
            cursor = conn.cursor()
            cursor.execute(f"CREATE TABLE {source} (id int, k {column})")
            cursor.execute(f"INSERT INTO {source} VALUES (1, {literal})")
        run = local.run(f'env {{ job.mode = BATCH\n job.retry.times = 0 }}\n'
                        f'source {{ Jdbc {{ plugin_output = "rows", url = "{url}", user = "{user}", '
                        f'table_path = "{source}" }} }}\n'
                        f'sink {{ Jdbc {{ plugin_input = "rows", url = "{url}", user = "{user}", '
                        f'table = "{created}", primary_keys = ["k"] }} }}\n')
        assert run.status == "FINISHED", run.error
        with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
            cursor = conn.cursor()
            cursor.execute(f"SELECT count(*) FROM {created}")
            assert cursor.fetchone()[0] == 1
    finally:
        with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
            for name in (source, created):
                conn.cursor().execute(f"DROP TABLE IF EXISTS {name}")


def test_a_string_keeps_its_length_across_databases_in_a_created_table():
    """varchar(n)/char(n) read from one kind of database is created as VARCHAR(n) in the other (the
    column's length travels in the field's metadata, as SeaTunnel's catalog carries it; a CHAR's
    trailing spaces mean different things in the two)."""
    from pyspark.sql import types as T

    from seatide.connectors.jdbc.dialect import Dialect
    from seatide.plugin.types import source_metadata

    schema = T.StructType([T.StructField("code", T.StringType(), True, source_metadata("postgresql", "character(5)")),
                           T.StructField("name", T.StringType(), True,
                                         source_metadata("postgresql", "character varying(40)")),
                           T.StructField("note", T.StringType(), True, source_metadata("mysql", "varchar(300)")),
                           T.StructField("huge", T.StringType(), True, source_metadata("postgresql", "varchar(20000)")),
                           T.StructField("body", T.StringType(), True, source_metadata("postgresql", "text"))])
    assert Dialect("mysql").create_table(("t",), schema, ["name"]) == (
        "CREATE TABLE `t` (`code` VARCHAR(5), `name` VARCHAR(40) NOT NULL, `note` varchar(300), `huge` LONGTEXT, "
        "`body` LONGTEXT, PRIMARY KEY (`name`))")
    assert Dialect("postgresql").create_table(("t",), schema, []) == (
        'CREATE TABLE "t" ("code" character(5), "name" character varying(40), "note" VARCHAR(300), '
        '"huge" varchar(20000), "body" text)')
