"""Copies of a table holding every type, between PostgreSQL (with PostGIS) and MariaDB, by real
jobs (Jdbc source -> Jdbc sink): into a table of the same definition, and into tables the sink
creates (schema_save_mode) in both databases. The copy must equal the source column by column:
in the database itself where both tables are of one kind, and as SeaTunnel values (read back by
the Jdbc source) across kinds."""

from __future__ import annotations

import pytest

from seatide.connectors.jdbc.url import JdbcUrl
from tests import every_type
from tests.every_type import (MY_COLUMNS, PG_COLUMNS, PG_NOT_PORTABLE, create_table, pg_extras, read_back,
                              same_values, unique)

pytestmark = pytest.mark.spark

PG_URL = "jdbc:postgresql://127.0.0.1:5432/test"
MY_URL = "jdbc:mariadb://127.0.0.1:3306/test"


def pg():
    return JdbcUrl.parse(PG_URL).connect("postgres", autocommit=True)


def mariadb():
    return JdbcUrl.parse(MY_URL).connect("root", "", autocommit=True)


@pytest.fixture
def tables():
    """Names handed out during a test; every one is dropped in both databases afterwards."""
    made: list[str] = []
    yield lambda prefix: made.append(unique(prefix)) or made[-1]
    with pg() as conn:
        for name in made:
            conn.execute(f"DROP TABLE IF EXISTS {name}")
    with mariadb() as conn, conn.cursor() as cur:
        for name in made:
            cur.execute(f"DROP TABLE IF EXISTS {name}")


def sink(url: str, table: str, user: str, mode: str = "CREATE_SCHEMA_WHEN_NOT_EXIST") -> str:
    return (f'  Jdbc {{ plugin_input = "rows", url = "{url}", user = "{user}", password = "", '
            f'table = "{table}", primary_keys = ["id"], schema_save_mode = "{mode}" }}\n')


def copy_job(url: str, user: str, table: str, sinks: str, env: str = "") -> str:
    return (f"env {{ job.mode = BATCH\n job.retry.times = 0\n {env} }}\n"
            f'source {{ Jdbc {{ plugin_output = "rows", url = "{url}", user = "{user}", password = "", '
            f'table_path = "{table}" }} }}\nsink {{\n{sinks}}}\n')


def pg_differences(source: str, copy: str, columns) -> dict:
    with pg() as conn:
        return every_type.pg_differences(conn, source, copy, columns)


def pg_column_types(table: str) -> dict:
    with pg() as conn:
        return dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
                                 "attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", (table,)).fetchall())


def my_differences(source: str, copy: str, columns) -> dict:
    with mariadb() as conn, conn.cursor() as cur:
        return every_type.my_differences(cur, source, copy, columns)


def my_column_types(table: str) -> dict:
    with mariadb() as conn, conn.cursor() as cur:
        cur.execute(f"SHOW COLUMNS FROM {table}")
        return {row[0]: row[1] for row in cur.fetchall()}


# plain BATCH reads with Spark's JDBC reader, checkpointed BATCH with the split reader
READS = {"plain": "", "checkpointed": "checkpoint.interval = 1000"}


@pytest.mark.parametrize("read", READS)
def test_postgresql_table_copies_into_postgresql_and_mariadb_equal_column_by_column(local, spark, tables, read):
    source, same, created, into_mariadb = (tables("pg_types_src"), tables("pg_types_same"),
                                           tables("pg_types_created"), tables("pg_types_my"))
    with pg() as conn:
        pg_extras(conn)
        create_table(conn.cursor(), source, PG_COLUMNS)
        create_table(conn.cursor(), same, PG_COLUMNS, rows=False)
    sinks = (sink(PG_URL, same, "postgres", "ERROR_WHEN_SCHEMA_NOT_EXIST") + sink(PG_URL, created, "postgres")
             + sink(MY_URL, into_mariadb, "root"))
    run = local.run(copy_job(PG_URL, "postgres", source, sinks, READS[read]))
    assert run.status == "FINISHED", run.error

    assert pg_differences(source, same, PG_COLUMNS) == {}
    # a table the sink creates declares each column as the source does (PostGIS included)
    declared, made = pg_column_types(source), pg_column_types(created)
    assert {c: made[c] for c in declared} == {c: PG_NOT_PORTABLE.get(c, t) for c, t in declared.items()}
    assert pg_differences(source, created, PG_COLUMNS) == {}

    arrays = [c for c, spec in PG_COLUMNS.items() if spec[2].startswith("array<")]
    expected = read_back(spark, PG_URL, "postgres", source)
    assert same_values(expected, read_back(spark, MY_URL, "root", into_mariadb), json_columns=arrays) == {}


@pytest.mark.parametrize("read", READS)
def test_mariadb_table_copies_into_mariadb_and_postgresql_equal_column_by_column(local, spark, tables, read):
    source, same, created, into_pg = (tables("my_types_src"), tables("my_types_same"), tables("my_types_created"),
                                      tables("my_types_pg"))
    with mariadb() as conn, conn.cursor() as cur:
        create_table(cur, source, MY_COLUMNS)
        create_table(cur, same, MY_COLUMNS, rows=False)
    sinks = (sink(MY_URL, same, "root", "ERROR_WHEN_SCHEMA_NOT_EXIST") + sink(MY_URL, created, "root")
             + sink(PG_URL, into_pg, "postgres"))
    run = local.run(copy_job(MY_URL, "root", source, sinks, READS[read]))
    assert run.status == "FINISHED", run.error

    assert my_differences(source, same, MY_COLUMNS) == {}
    assert my_column_types(created) == my_column_types(source)
    assert my_differences(source, created, MY_COLUMNS) == {}

    expected = read_back(spark, MY_URL, "root", source)
    assert same_values(expected, read_back(spark, PG_URL, "postgres", into_pg)) == {}


def query_sink(url: str, table: str, user: str, columns) -> str:
    names = ", ".join(("id", *columns))
    marks = ", ".join("?" for _ in range(len(columns) + 1))
    return (f'  Jdbc {{ plugin_input = "rows", url = "{url}", user = "{user}", password = "", '
            f'query = "INSERT INTO {table} ({names}) VALUES ({marks})" }}\n')


def test_a_sink_query_writes_every_type_into_columns_of_those_types(local, tables):
    # SeaTunnel's jobs often write with `query` (INSERT ... VALUES (?, ...)) into typed columns
    pg_source, pg_copy, my_source, my_copy = (tables("pg_q_src"), tables("pg_q_copy"), tables("my_q_src"),
                                              tables("my_q_copy"))
    with pg() as conn:
        pg_extras(conn)
        create_table(conn.cursor(), pg_source, PG_COLUMNS)
        conn.execute(f"CREATE TABLE {pg_copy} (LIKE {pg_source})")
    with mariadb() as conn, conn.cursor() as cur:
        create_table(cur, my_source, MY_COLUMNS)
        cur.execute(f"CREATE TABLE {my_copy} LIKE {my_source}")
    for url, user, source, copy, columns in ((PG_URL, "postgres", pg_source, pg_copy, PG_COLUMNS),
                                             (MY_URL, "root", my_source, my_copy, MY_COLUMNS)):
        run = local.run(copy_job(url, user, source, query_sink(url, copy, user, columns)))
        assert run.status == "FINISHED", run.error
    assert pg_differences(pg_source, pg_copy, PG_COLUMNS) == {}
    assert my_differences(my_source, my_copy, MY_COLUMNS) == {}
