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
from tests.e2e.test_schema_evolution import cdc_job, shop  # noqa: F401  (shop: a fixture)

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


def jdbc_target(target: str, table: str):
    """The target's connect function and the Jdbc sink block writing ``table`` there."""
    url = "jdbc:mariadb://127.0.0.1:3306/test" if target == "mariadb" else "jdbc:postgresql://127.0.0.1:5432/test"
    user = "root" if target == "mariadb" else "postgres"
    sink = f'Jdbc {{ url = "{url}", user = "{user}", password = "", table = "{table}", primary_keys = ["id"] }}'
    return (mariadb_connect if target == "mariadb" else pg_connect), sink


def changes_then_stop(server, db: str, statements: list[str], count, ids):
    """A ``stop_after``: waits for the snapshot (``count()`` rows), makes ``statements`` on the source,
    waits for row 99 (in ``ids()``), then stops the job; ``.ok`` once all that happened."""
    def drive(store, job_id):
        try:
            wait_for(lambda: count() == 20, "the snapshot")
            server.execute(*[s.replace("items", f"{db}.items") for s in statements])
            wait_for(lambda: 99 in ids(), "the last row")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    return drive


@pytest.mark.parametrize("target", ["mariadb", "postgresql"])
def test_an_added_column_keeps_its_nullability_and_default_and_the_rows_the_server_filled_get_it(
        local, defaults_shop, target):
    server, db = defaults_shop
    table = f"dflt_{secrets.token_hex(3)}"
    connect, sink = jdbc_target(target, table)

    drive = changes_then_stop(server, db, ADDED, lambda: len(fetch(connect, f"SELECT id FROM {table}")),
                              lambda: [r[0] for r in fetch(connect, f"SELECT id FROM {table}")])
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
    connect, sink = jdbc_target(target, table)
    statements = ["ALTER TABLE items ADD COLUMN code INT NOT NULL DEFAULT 3",
                  "INSERT INTO items VALUES (50, 'before', 8)", "ALTER TABLE items DROP COLUMN code",
                  "INSERT INTO items VALUES (99, 'after')"]

    drive = changes_then_stop(server, db, statements, lambda: len(fetch(connect, f"SELECT id FROM {table}")),
                              lambda: [r[0] for r in fetch(connect, f"SELECT id FROM {table}")])
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

    drive = changes_then_stop(server, db, ["ALTER TABLE items ADD COLUMN code VARCHAR(8) NOT NULL DEFAULT 'yy'",
                                           "INSERT INTO items VALUES (99, 'last', 'set')"],
                              lambda: len(table_rows()), lambda: [r[0] for r in table_rows()])
    sink = (f'Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {{ type = "hadoop", warehouse = '
            f'"{config["warehouse"]}" }}, iceberg.table.primary-keys = "id", iceberg.table.upsert-mode-enabled = true, '
            'iceberg.table.schema-evolution-enabled = true }')
    run = local.run(job(server, db, sink), stop_after=drive)
    assert drive.ok, run.error
    assert rows_of(config, columns=("id", "code")) == [*((i, "yy") for i in range(1, 21)), (99, "set")]


@pytest.mark.parametrize("target", ["mariadb", "postgresql"])
def test_postgres_cdc_takes_an_added_columns_not_null_and_default_from_the_catalog(local, shop, target):  # noqa: F811
    """pgoutput carries no DDL and the rows an ADD COLUMN ... DEFAULT fills are not in the stream:
    Postgres-CDC reads the new column's NOT NULL and default from the catalog when the Relation
    message shows it, and the target's ADD COLUMN fills its rows with them."""
    server, db = shop
    table = f"dflt_{secrets.token_hex(3)}"
    connect, sink = jdbc_target(target, table)

    def source_execute(*statements):
        with server.connect(db) as conn:
            for statement in statements:
                conn.execute(statement)

    source = type("Source", (), {"execute": staticmethod(source_execute)})()
    drive = changes_then_stop(source, "public", [
        "ALTER TABLE items ADD COLUMN add_column1 varchar(64) NOT NULL DEFAULT 'yy', ADD COLUMN add_column2 int "
        "DEFAULT 7, ADD COLUMN add_column3 timestamp NOT NULL DEFAULT now()",
        "INSERT INTO items (id, add_column1) VALUES (99, 'set')"],
        lambda: len(fetch(connect, f"SELECT id FROM {table}")), lambda: [r[0] for r in fetch(connect, f"SELECT id FROM {table}")])
    try:
        run = local.run(cdc_job(server, db, sink, "evolve"), stop_after=drive)
        assert drive.ok, run.error
        if target == "mariadb":
            assert described(fetch(connect, f"DESC {table}"))[4:] == [
                ("add_column1", "varchar(64)", "NO", "yy"), ("add_column2", "int(11)", "YES", "7"),
                ("add_column3", "datetime(6)", "NO", "current_timestamp(6)")]
        else:
            assert fetch(connect, "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
                                  "WHERE table_name = %s AND column_name LIKE 'add%%' ORDER BY ordinal_position",
                         (table,)) == [("add_column1", "NO", "'yy'::character varying"), ("add_column2", "YES", "7"),
                                       ("add_column3", "NO", "CURRENT_TIMESTAMP")]
        got = fetch(connect, f"SELECT id, add_column1, add_column2, add_column3 IS NOT NULL FROM {table} ORDER BY id")
        assert got == [*((i, "yy", 7, True) for i in range(1, 21)), (99, "set", 7, True)]
    finally:
        with connect() as conn:
            conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")
