"""A CDC job stopped, its config changed to add a table to ``table-names``, and resumed with the new
config (``seatide resume JOB --config new.conf``): the new table's target is created by the sink's
save mode and gets the table's snapshot and then its changes; the old table goes on from its
position; every target equals its source. Real private CDC servers, real Jdbc targets, the real
control plane and runtime in the shared SparkSession (tests/e2e/harness.py)."""

from __future__ import annotations

import secrets

import pytest

from seatide import intents
from seatide.store.jobs import request_stop
from tests.databases.jobs import mariadb_connect, pg_connect
from tests.e2e.harness import wait_for

pytestmark = pytest.mark.spark



def stopping(when, changes, savepoint: bool = False):
    """A ``stop_after`` for the harness: wait for ``when``, make ``changes``, wait again, then stop."""
    def drive(store, job_id):
        try:
            wait_for(when, "the targets to equal their sources")
            if changes:
                changes()
                wait_for(when, "the changes to reach the targets")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=savepoint, actor="test")
    drive.ok = False
    return drive


def sorted_rows(cursor, sql: str) -> list[tuple]:
    cursor.execute(sql)
    return sorted(tuple(r) for r in cursor.fetchall())


# -- Postgres-CDC into PostgreSQL: one table, then two (the job becomes a multi-table one) ------------

@pytest.fixture
def pg_shop(private_postgres):
    shop, schema = f"added_{secrets.token_hex(3)}", f"added_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {shop}")
    with private_postgres.connect(shop) as conn:
        conn.execute("CREATE TABLE member (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO member SELECT g, 'm' || g FROM generate_series(1, 40) g")
    with pg_connect() as pg:
        pg.execute(f"CREATE SCHEMA {schema}")
    yield private_postgres, shop, schema
    private_postgres.drop_database(shop)
    with pg_connect() as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_job(server, shop: str, schema: str, tables: list[str]) -> str:
    names = ", ".join(f'"{shop}.public.{t}"' for t in tables)
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:{server.port}/{shop}", username = "postgres", password = ""
    table-names = [{names}]
    snapshot.split.size = 16
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", password = ""
    database = "test", schema = "{schema}", table = "sink_${{table_name}}", primary_keys = ["id"]
  }}
}}
"""


def test_postgres_cdc_resumed_with_an_added_table_snapshots_it_and_continues_the_other(local, pg_shop):
    server, shop, schema = pg_shop

    def source(sql):
        with server.connect(shop) as conn:
            return sorted(tuple(r) for r in conn.execute(sql).fetchall())

    def same(tables):
        def check():
            with pg_connect() as pg:
                cursor = pg.cursor()
                return all(sorted_rows(cursor, f"SELECT id, name FROM {schema}.sink_{t}") ==
                           source(f"SELECT id, name FROM {t}") for t in tables)
        return check

    def execute(*statements):
        with server.connect(shop) as conn:
            for statement in statements:
                conn.execute(statement)

    first = stopping(same(["member"]), lambda: execute("UPDATE member SET name = 'first run' WHERE id <= 5"))
    job_id = local.submit(pg_job(server, shop, schema, ["member"]))
    run = local.drive(job_id, stop_after=first)
    assert first.ok and run.status == "CANCELED", run.error

    # while the job is stopped: the old table changes; a new table is created, filled and changed
    execute("INSERT INTO member VALUES (41, 'while stopped')", "DELETE FROM member WHERE id = 6",
            "CREATE TABLE purchase (id bigint PRIMARY KEY, name text)",
            "INSERT INTO purchase SELECT g, 'p' || g FROM generate_series(1, 50) g",
            "UPDATE purchase SET name = 'changed while stopped' WHERE id <= 3", "DELETE FROM purchase WHERE id = 4")

    intents.resume(local.store, job_id, text=pg_job(server, shop, schema, ["member", "purchase"]), actor="test")
    second = stopping(same(["member", "purchase"]),
                      lambda: execute("UPDATE member SET name = 'second run' WHERE id = 7",
                                      "INSERT INTO purchase VALUES (51, 'after resume')",
                                      "UPDATE purchase SET name = 'after resume' WHERE id = 8"))
    run = local.drive(job_id, stop_after=second)
    assert second.ok and run.status == "CANCELED", run.error
    with server.connect() as admin:
        assert admin.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s",
                             (shop,)).fetchone()[0] == 1     # one slot serves both tables


# -- MySQL-CDC into MariaDB: stopped with a savepoint, two tables, then three ----------------------------

@pytest.fixture
def mysql_shop(private_mariadb):
    shop = f"added_{secrets.token_hex(3)}"
    private_mariadb.execute(
        f"CREATE DATABASE {shop}",
        *[f"CREATE TABLE {shop}.{t} (id INT PRIMARY KEY, name VARCHAR(40))" for t in ("member", "purchase")],
        *[f"INSERT INTO {shop}.{t} SELECT seq, concat('{t[0]}', seq) FROM seq_1_to_30" for t in ("member", "purchase")])
    yield private_mariadb, shop
    private_mariadb.execute(f"DROP DATABASE {shop}")
    with mariadb_connect() as db, db.cursor() as cur:
        for table in ("member", "purchase", "refund"):
            cur.execute(f"DROP TABLE IF EXISTS test.{shop}_{table}")


def mysql_job(server, shop: str, tables: list[str]) -> str:
    names = ", ".join(f'"{shop}.{t}"' for t in tables)
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  MySQL-CDC {{
    base-url = "jdbc:mysql://127.0.0.1:{server.port}/{shop}", username = "root", password = ""
    table-names = [{names}]
    snapshot.split.size = 16
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:mariadb://127.0.0.1:3306/test", user = "root", password = ""
    database = "test", table = "{shop}_${{table_name}}"
  }}
}}
"""


def test_mysql_cdc_resumed_from_a_savepoint_with_an_added_table(local, mysql_shop):
    server, shop = mysql_shop

    def same(tables):
        def check():
            with server.connect(shop) as src, src.cursor() as source, mariadb_connect() as dst, dst.cursor() as target:
                return all(sorted_rows(target, f"SELECT id, name FROM test.{shop}_{t}") ==
                           sorted_rows(source, f"SELECT id, name FROM {t}") for t in tables)
        return check

    def execute(*statements):
        server.execute(*[s.replace("{shop}", shop) for s in statements])

    first = stopping(same(["member", "purchase"]),
                     lambda: execute("UPDATE {shop}.member SET name = 'first run' WHERE id <= 5"), savepoint=True)
    job_id = local.submit(mysql_job(server, shop, ["member", "purchase"]))
    run = local.drive(job_id, stop_after=first)
    assert first.ok and run.status == "SAVEPOINT_DONE", run.error

    execute("INSERT INTO {shop}.member VALUES (31, 'while stopped')", "DELETE FROM {shop}.purchase WHERE id = 6",
            "CREATE TABLE {shop}.refund (id INT PRIMARY KEY, name VARCHAR(40))",
            "INSERT INTO {shop}.refund SELECT seq, concat('r', seq) FROM seq_1_to_50",
            "UPDATE {shop}.refund SET name = 'changed while stopped' WHERE id <= 3", "DELETE FROM {shop}.refund WHERE id = 4")

    intents.resume(local.store, job_id, text=mysql_job(server, shop, ["member", "purchase", "refund"]), actor="test")
    second = stopping(same(["member", "purchase", "refund"]),
                      lambda: execute("UPDATE {shop}.purchase SET name = 'second run' WHERE id = 7",
                                      "INSERT INTO {shop}.refund VALUES (51, 'after resume')",
                                      "UPDATE {shop}.refund SET name = 'after resume' WHERE id = 8"))
    run = local.drive(job_id, stop_after=second)
    assert second.ok and run.status == "CANCELED", run.error
