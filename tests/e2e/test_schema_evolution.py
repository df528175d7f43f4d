"""Schema evolution end to end (plugin/evolution.py): a CDC source's table gains, loses, renames and
retypes columns while the job runs, and the Jdbc and LocalFile sinks follow as each behaviour says.
Real private CDC servers, real targets, the real runtime in the shared SparkSession."""

from __future__ import annotations

import os
import secrets
import time
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

from seatide.store.jobs import request_stop
from tests.databases.jobs import mariadb_connect, pg_connect
from tests.e2e.harness import wait_for

pytestmark = pytest.mark.spark



@pytest.fixture
def shop(private_postgres):
    name = f"evo_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    with private_postgres.connect(name) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name varchar(20), qty int, price numeric(8, 2))")
        conn.execute("INSERT INTO items SELECT g, 'item ' || g, g, g * 1.5 FROM generate_series(1, 20) g")
    yield private_postgres, name
    private_postgres.drop_database(name)


def cdc_job(server, db: str, sink: str, behaviour: str, transform: str = "") -> str:
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:{server.port}/{db}", username = "postgres", password = ""
    table-names = ["{db}.public.items"]
    schema.change.behavior = "{behaviour}"
  }}
}}
transform {{ {transform} }}
sink {{ {sink} }}
"""


# Files take every row kind as a field: the changes stay visible as rows
KINDS = 'RowKindExtractor { custom_field_name = "op" }'


def columns(connect, table: str, schema: str) -> list[str]:
    with connect() as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                       "AND table_schema = %s ORDER BY ordinal_position", (table, schema))
        return [r[0] for r in cursor.fetchall()]


def rows(connect, sql: str) -> list[tuple]:
    with connect() as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        return sorted(tuple(r) for r in cursor.fetchall())


CHANGES = [
    "ALTER TABLE items ADD COLUMN note text",
    "UPDATE items SET note = 'n' || id WHERE id <= 5",
    "ALTER TABLE items RENAME COLUMN qty TO quantity",
    "UPDATE items SET quantity = quantity + 100 WHERE id BETWEEN 3 AND 8",
    "ALTER TABLE items DROP COLUMN name",
    "INSERT INTO items (id, quantity, price, note) VALUES (21, 7, 9.5, 'new')",
    "ALTER TABLE items ALTER COLUMN price TYPE numeric(12, 3)",
    "UPDATE items SET price = 123456.789 WHERE id = 21",
]


def run_with_changes(local, job: str, ready, converged, statements: list[str] = CHANGES):
    """Run the job until ``ready`` holds, make ``statements`` one by one, then wait for
    ``converged`` and stop the job."""
    def drive(store, job_id):
        try:
            wait_for(ready, "the snapshot")
            for statement in statements:
                drive.server_execute(statement)
            wait_for(converged, "the target to follow every change")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    return drive


def until_the_last_row(connect, table: str, make_changes):
    """A ``stop_after`` that waits for the snapshot, makes the changes at once (no pause between
    statements), waits for the row LAST inserts, then stops the job."""
    def drive(store, job_id):
        try:
            wait_for(lambda: len(rows(connect, f"SELECT id FROM {table}")) == 20, "the snapshot")
            make_changes()
            wait_for(lambda: rows(connect, f"SELECT id FROM {table} WHERE id = 99") == [(99,)], "the last row")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    return drive


@pytest.mark.parametrize("target", ["postgresql", "mariadb"])
def test_evolve_applies_every_change_to_the_jdbc_target_in_order(local, shop, target):
    server, db = shop
    table = f"evo_{secrets.token_hex(3)}"
    if target == "postgresql":
        connect, schema = pg_connect, "public"
        sink = f'Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", password = "", table = "{table}", primary_keys = ["id"] }}'
    else:
        connect, schema = mariadb_connect, "test"
        sink = f'Jdbc {{ url = "jdbc:mariadb://127.0.0.1:3306/test", user = "root", password = "", table = "{table}", primary_keys = ["id"] }}'

    def source_rows():
        with server.connect(db) as conn:
            return sorted((r[0], r[1], r[2], r[3]) for r in
                          conn.execute("SELECT id, quantity, price, note FROM items").fetchall())

    drive = run_with_changes(
        local, "", lambda: len(rows(connect, f"SELECT id FROM {table}")) == 20,
        lambda: columns(connect, table, schema) == ["id", "quantity", "price", "note"]
        and rows(connect, f"SELECT id, quantity, price, note FROM {table}") == source_rows())

    def execute(statement):
        with server.connect(db) as conn:
            conn.execute(statement)
        time.sleep(0.6)           # one statement per micro-batch or so: the changes meet the rows in turn

    drive.server_execute, drive.ok = execute, False
    try:
        run = local.run(cdc_job(server, db, sink, "evolve"), stop_after=drive)
        assert drive.ok, run.error
        assert run.status == "CANCELED", run.error
        got = dict((r[0], r) for r in rows(connect, f"SELECT id, quantity, price, note FROM {table}"))
        assert got[21] == (21, 7, Decimal("123456.789"), "new")
        assert got[4] == (4, 104, Decimal("6.000"), "n4")         # renamed: older values kept under the new name
    finally:
        with connect() as conn:
            conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


def test_lenient_keeps_dropped_and_renamed_columns_and_ignore_keeps_the_shape(local, shop):
    server, db = shop
    lenient, ignore = f"len_{secrets.token_hex(3)}", f"ign_{secrets.token_hex(3)}"
    base = 'url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", password = "", primary_keys = ["id"]'

    def execute(statement):
        with server.connect(db) as conn:
            conn.execute(statement)
        time.sleep(0.6)

    for behaviour, table, expected_columns, price in (
            ("lenient", lenient, ["id", "name", "qty", "price", "note", "quantity"], Decimal("123456.789")),
            ("ignore", ignore, ["id", "name", "qty", "price"], Decimal("123456.79"))):
        sink = f'Jdbc {{ {base}, table = "{table}" }}'

        def settled(table=table, expected_columns=expected_columns, price=price):
            if columns(pg_connect, table, "public") != expected_columns:
                return False
            return rows(pg_connect, f"SELECT price FROM {table} WHERE id = 21") == [(price,)]
        drive = run_with_changes(local, "", lambda table=table: len(rows(pg_connect, f"SELECT id FROM {table}")) == 20,
                                 settled)
        drive.server_execute, drive.ok = execute, False
        try:
            run = local.run(cdc_job(server, db, sink, behaviour), stop_after=drive)
            assert drive.ok, (behaviour, run.error)
            if behaviour == "lenient":
                # the dropped name keeps its values for the rows not written since the drop; the renamed
                # qty keeps the values of rows not written since the rename, quantity the newer ones
                assert rows(pg_connect, f"SELECT id, name, qty, quantity FROM {table} WHERE id IN (2, 4, 21)") == [
                    (2, "item 2", 2, None), (4, "item 4", None, 104), (21, None, None, 7)]
        finally:
            with pg_connect() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        with server.connect(db) as conn:          # the same table again for the next behaviour
            conn.execute("DROP TABLE items")
            conn.execute("CREATE TABLE items (id int PRIMARY KEY, name varchar(20), qty int, price numeric(8, 2))")
            conn.execute("INSERT INTO items SELECT g, 'item ' || g, g, g * 1.5 FROM generate_series(1, 20) g")


def test_exception_fails_the_job_naming_the_change(local, shop, tmp_path):
    server, db = shop
    out = tmp_path / "out"

    def drive(store, job_id):
        wait_for(lambda: any(f.endswith(".parquet") for _, _, fs in os.walk(out) for f in fs), "the snapshot")
        with server.connect(db) as conn:
            conn.execute("ALTER TABLE items ADD COLUMN note text")
            conn.execute("UPDATE items SET note = 'x' WHERE id = 1")

    run = local.run(cdc_job(server, db, f'LocalFile {{ path = "{out}", file_format_type = "parquet" }}', "exception",
                            KINDS), stop_after=drive)
    assert run.status == "FAILED"
    assert "gained columns ['note']" in run.error and "schema.change.behavior = exception" in run.error


def test_localfile_takes_new_columns_from_the_next_batch_on(local, shop, tmp_path):
    server, db = shop
    out = tmp_path / "out"

    def files():
        found = []
        for root, dirs, names in os.walk(out):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [os.path.join(root, n) for n in names if n.endswith(".parquet")]
        return found

    def drive(store, job_id):
        try:
            wait_for(lambda: sum(pq.read_metadata(f).num_rows for f in files()) == 20, "the snapshot")
            with server.connect(db) as conn:
                conn.execute("ALTER TABLE items ADD COLUMN note text")
                conn.execute("ALTER TABLE items RENAME COLUMN qty TO quantity")
                conn.execute("UPDATE items SET note = 'x', quantity = 0 WHERE id = 1")
            wait_for(lambda: any("note" in pq.read_schema(f).names for f in files()), "a file with the new column")
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    run = local.run(cdc_job(server, db, f'LocalFile {{ path = "{out}", file_format_type = "parquet" }}', "evolve",
                            KINDS), stop_after=drive)
    assert run.status == "CANCELED", run.error
    newest = [pq.read_table(f) for f in files() if "note" in pq.read_schema(f).names]
    assert [t.column_names for t in newest] == [["id", "name", "quantity", "price", "note", "op"]]
    assert newest[0].to_pylist()[-1]["note"] == "x" and newest[0].to_pylist()[-1]["quantity"] == 0


@pytest.fixture
def mysql_shop(private_mariadb):
    name = f"evo_{secrets.token_hex(3)}"
    private_mariadb.execute(
        f"CREATE DATABASE {name}",
        f"CREATE TABLE {name}.items (id INT PRIMARY KEY, name VARCHAR(20), qty INT, price DECIMAL(8, 2))",
        f"INSERT INTO {name}.items SELECT seq, concat('item ', seq), seq, seq * 1.5 FROM seq_1_to_20")
    yield private_mariadb, name
    private_mariadb.execute(f"DROP DATABASE {name}")


def mysql_cdc_job(server, db: str, table: str) -> str:
    return f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{
  MySQL-CDC {{
    server-id = 5651
    username = "root"
    password = ""
    table-names = ["{db}.items"]
    base-url = "jdbc:mysql://127.0.0.1:{server.port}/{db}"
    debezium = {{
      include.schema.changes = true
    }}
  }}
}}
sink {{
  jdbc {{
    url = "jdbc:mysql://127.0.0.1:3306/test"
    driver = "com.mysql.cj.jdbc.Driver"
    user = "root"
    password = ""
    generate_sink_sql = true
    database = test
    table = {table}
    primary_keys = ["id"]
    is_exactly_once = true
    xa_data_source_class_name = "com.mysql.cj.jdbc.MysqlXADataSource"
  }}
}}
"""


MYSQL_CHANGES = [c.replace("ALTER COLUMN price TYPE numeric(12, 3)", "MODIFY COLUMN price DECIMAL(12, 3)")
                 .replace("'n' || id", "concat('n', id)") for c in CHANGES]


# After every change, one row more: the target has it once the job has read past them all
LAST = "INSERT INTO items (id, quantity, price, note) VALUES (99, 1, 1.5, 'last')"


@pytest.mark.parametrize("source", ["mysql-cdc", "postgres-cdc"])
def test_changes_made_back_to_back_reach_the_target_each_in_its_turn(local, request, source):
    """The changes and the rows between them made at once, as a busy application (or a slow machine)
    makes them: several changes are in the log before the job starts its query again, and each is
    still applied in its turn with the rows around it (a rename stays a rename: the values under the
    old name are not lost, and the columns keep their order). MySQL-CDC runs with SeaTunnel's own
    switch (its schema-evolution page: debezium.include.schema.changes = true into a Jdbc MySQL sink)
    and follows each ALTER TABLE statement of the binlog; Postgres-CDC each Relation message, which
    comes with the first row of a transaction after a change."""
    table = f"evo_{secrets.token_hex(3)}"
    if source == "mysql-cdc":
        server, db = request.getfixturevalue("mysql_shop")
        connect, schema, job = mariadb_connect, "test", mysql_cdc_job(server, db, table)

        def make_changes():
            server.execute(*[s.replace("items", f"{db}.items") for s in [*MYSQL_CHANGES, LAST]])
    else:
        server, db = request.getfixturevalue("shop")
        connect, schema = pg_connect, "public"
        job = cdc_job(server, db, f'Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", '
                                  f'password = "", table = "{table}", primary_keys = ["id"] }}', "evolve")

        def make_changes():
            with server.connect(db) as conn:
                for statement in [*CHANGES, LAST]:
                    conn.execute(statement)

    drive = until_the_last_row(connect, table, make_changes)
    try:
        run = local.run(job, stop_after=drive)
        assert drive.ok, run.error
        assert run.status == "CANCELED", run.error
        assert columns(connect, table, schema) == ["id", "quantity", "price", "note"]
        got = dict((r[0], r) for r in rows(connect, f"SELECT id, quantity, price, note FROM {table}"))
        assert got[4] == (4, 104, Decimal("6.000"), "n4")        # noted, renamed, then updated
        assert got[10] == (10, 10, Decimal("15.000"), None)      # the renamed column's value from the snapshot
        assert got[21] == (21, 7, Decimal("123456.789"), "new")
        assert sorted(got) == [*range(1, 22), 99]
    finally:
        with connect() as conn:
            conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


# A rename and a drop with no row of the table between them: pgoutput sends them as one Relation
GAP = ["ALTER TABLE items ADD COLUMN note text", "UPDATE items SET note = 'n' || id WHERE id <= 5",
       "ALTER TABLE items RENAME COLUMN qty TO quantity", "ALTER TABLE items DROP COLUMN name",
       "UPDATE items SET quantity = quantity + 100 WHERE id BETWEEN 3 AND 8", LAST]


def test_postgres_cdc_tells_a_rename_from_a_drop_when_two_changes_arrive_as_one_relation(local, shop):
    """Two changes with no row between them reach Postgres-CDC as one Relation message, whose columns
    name no identity: the job takes each column's attnum from the server's catalog (a rename keeps
    it), so qty renamed to quantity next to name dropped stays a rename and no older value is nulled."""
    server, db = shop
    table = f"evo_{secrets.token_hex(3)}"
    job = cdc_job(server, db, f'Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", '
                              f'password = "", table = "{table}", primary_keys = ["id"] }}', "evolve")

    def make_changes():
        with server.connect(db) as conn:
            for statement in GAP:
                conn.execute(statement)

    drive = until_the_last_row(pg_connect, table, make_changes)
    try:
        run = local.run(job, stop_after=drive)
        assert drive.ok, run.error
        assert run.status == "CANCELED", run.error
        assert columns(pg_connect, table, "public") == ["id", "quantity", "price", "note"]
        got = dict((r[0], r) for r in rows(pg_connect, f"SELECT id, quantity, price, note FROM {table}"))
        assert got[2] == (2, 2, Decimal("3.00"), "n2")             # renamed, never updated: kept
        assert got[4] == (4, 104, Decimal("6.00"), "n4")
        assert got[10] == (10, 10, Decimal("15.00"), None)
        assert sorted(got) == [*range(1, 21), 99]
    finally:
        with pg_connect() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
