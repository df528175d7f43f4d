"""ADD COLUMN with NOT NULL and a DEFAULT, from MySQL-CDC to a Jdbc target (finding 11 of issue 30,
and SeaTunnel's ``mysqlcdc_to_mysql_with_schema_change``, which compares ``DESC`` of source and sink
after the ALTER). The server fills the rows it has with the default without writing a row event
for them, so the target must get the same column definition: its own ADD COLUMN ... DEFAULT fills
the target's rows as the source's did. Real private MariaDB with binlog, real targets, the real runtime."""

from __future__ import annotations

import secrets

import pytest

from seatide.store.jobs import request_stop
from tests.databases.jobs import mariadb_connect, pg_connect
from tests.e2e.harness import wait_for

pytestmark = pytest.mark.spark

ADDED = ["ALTER TABLE items ADD COLUMN add_column1 VARCHAR(64) NOT NULL DEFAULT 'yy', "
         "ADD COLUMN add_column2 INT DEFAULT 7, ADD COLUMN add_column3 DATETIME NOT NULL DEFAULT current_timestamp(), "
         "ADD COLUMN add_column4 VARCHAR(9) NOT NULL DEFAULT 'it''s'",
         "INSERT INTO items (id, name, add_column1, add_column2) VALUES (99, 'last', 'set', NULL)"]


@pytest.fixture
def defaults_shop(private_mariadb):
    name = f"dflt_{secrets.token_hex(3)}"
    private_mariadb.execute(
        f"CREATE DATABASE {name}", f"CREATE TABLE {name}.items (id INT PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO {name}.items SELECT seq, concat('item ', seq) FROM seq_1_to_20")
    yield private_mariadb, name
    private_mariadb.execute(f"DROP DATABASE {name}")


def job(server, db: str, sink: str) -> str:
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{ MySQL-CDC {{
  server-id = 5661, username = "root", password = "", table-names = ["{db}.items"]
  base-url = "jdbc:mysql://127.0.0.1:{server.port}/{db}", schema-changes.enabled = true
}} }}
sink {{ {sink} }}
"""


def fetch(connect, sql: str, args=()) -> list[tuple]:
    with connect() as conn:
        cursor = conn.cursor()
        cursor.execute(sql, args)
        return [tuple(r) for r in cursor.fetchall()]


def described(rows) -> list[tuple]:
    """DESC's Field, Type, Null and Default (Key and Extra aside: the sink's key is its own)."""
    return [(r[0], r[1], r[2], r[4]) for r in rows]


@pytest.mark.parametrize("target", ["mariadb", "postgresql"])
def test_an_added_column_keeps_its_nullability_and_default_and_the_rows_the_server_filled_get_it(
        local, defaults_shop, target):
    server, db = defaults_shop
    table = f"dflt_{secrets.token_hex(3)}"
    url = "jdbc:mariadb://127.0.0.1:3306/test" if target == "mariadb" else "jdbc:postgresql://127.0.0.1:5432/test"
    user = "root" if target == "mariadb" else "postgres"
    connect = mariadb_connect if target == "mariadb" else pg_connect
    sink = f'Jdbc {{ url = "{url}", user = "{user}", password = "", table = "{table}", primary_keys = ["id"] }}'

    def drive(store, job_id):
        try:
            wait_for(lambda: len(fetch(connect, f"SELECT id FROM {table}")) == 20, "the snapshot")
            server.execute(*[s.replace("items", f"{db}.items") for s in ADDED])
            wait_for(lambda: fetch(connect, f"SELECT id FROM {table} WHERE id = 99") == [(99,)], "the last row")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    try:
        run = local.run(job(server, db, sink), stop_after=drive)
        assert drive.ok, run.error
        assert run.status == "CANCELED", run.error
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DESC {db}.items")
            source = described(cur.fetchall())
        if target == "mariadb":
            assert described(fetch(connect, f"DESC {table}")) == source
        else:
            assert fetch(connect, "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
                                  "WHERE table_name = %s AND column_name LIKE 'add%%' ORDER BY ordinal_position",
                         (table,)) == [
                ("add_column1", "NO", "'yy'::character varying"), ("add_column2", "YES", "7"),
                ("add_column3", "NO", "CURRENT_TIMESTAMP"), ("add_column4", "NO", "'it''s'::character varying")]
        # the rows the server filled without a row event have the default in the target too
        got = fetch(connect, f"SELECT id, add_column1, add_column2, add_column3 IS NOT NULL, add_column4 FROM {table} "
                             "ORDER BY id")
        assert got[:20] == [(i, "yy", 7, True, "it's") for i in range(1, 21)]
        assert got[20] == (99, "set", None, True, "it's")
    finally:
        with connect() as conn:
            conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.parametrize("target", ["mariadb", "postgresql"])
def test_under_lenient_a_not_null_column_the_source_drops_takes_null_in_the_target_from_then_on(
        local, defaults_shop, target):
    """Lenient keeps a dropped column in the target, and rows written after the drop leave it null:
    a column that came NOT NULL must take that null, or every later row fails its batch."""
    server, db = defaults_shop
    table = f"dflt_{secrets.token_hex(3)}"
    url = "jdbc:mariadb://127.0.0.1:3306/test" if target == "mariadb" else "jdbc:postgresql://127.0.0.1:5432/test"
    user = "root" if target == "mariadb" else "postgres"
    connect = mariadb_connect if target == "mariadb" else pg_connect
    sink = f'Jdbc {{ url = "{url}", user = "{user}", password = "", table = "{table}", primary_keys = ["id"] }}'
    statements = ["ALTER TABLE items ADD COLUMN code INT NOT NULL DEFAULT 3",
                  "INSERT INTO items VALUES (50, 'before', 8)", "ALTER TABLE items DROP COLUMN code",
                  "INSERT INTO items VALUES (99, 'after')"]

    def drive(store, job_id):
        try:
            wait_for(lambda: len(fetch(connect, f"SELECT id FROM {table}")) == 20, "the snapshot")
            server.execute(*[s.replace("items", f"{db}.items") for s in statements])
            wait_for(lambda: fetch(connect, f"SELECT id FROM {table} WHERE id = 99") == [(99,)], "the last row")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    try:
        run = local.run(job(server, db, sink).replace("schema-changes.enabled = true",
                                                      'schema.change.behavior = "lenient"'), stop_after=drive)
        assert drive.ok, run.error
        got = fetch(connect, f"SELECT id, code FROM {table} WHERE id IN (1, 50, 99) ORDER BY id")
        assert got == [(1, 3), (50, 8), (99, None)]
    finally:
        with connect() as conn:
            conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


def test_an_added_column_with_a_literal_default_reads_it_in_the_iceberg_rows_written_before(
        local, defaults_shop, tmp_path):
    """Iceberg: the new column's initial default is the source's literal default, so the rows the
    server filled without a row change read it (pyiceberg's reader fills it into older files)."""
    from tests.connectors.iceberg_helpers import rows_of

    server, db = defaults_shop
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}

    def table_rows():
        try:
            return rows_of(config)
        except Exception:     # noqa: BLE001 - not created yet
            return []

    def drive(store, job_id):
        try:
            wait_for(lambda: len(table_rows()) == 20, "the snapshot")
            server.execute(f"ALTER TABLE {db}.items ADD COLUMN code VARCHAR(8) NOT NULL DEFAULT 'yy'",
                           f"INSERT INTO {db}.items VALUES (99, 'last', 'set')")
            wait_for(lambda: any(r[0] == 99 for r in table_rows()), "the last row")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    sink = (f'Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {{ type = "hadoop", warehouse = '
            f'"{config["warehouse"]}" }}, iceberg.table.primary-keys = "id", iceberg.table.upsert-mode-enabled = true, '
            'iceberg.table.schema-evolution-enabled = true }')
    run = local.run(job(server, db, sink), stop_after=drive)
    assert drive.ok, run.error
    assert rows_of(config, columns=("id", "code")) == [*((i, "yy") for i in range(1, 21)), (99, "set")]
