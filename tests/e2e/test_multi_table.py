"""Multi-table jobs in the shared SparkSession, through the real control-plane code: one source of
several tables, each table routed to its own target, one commit decision per micro-batch for every
table (docs/design/multi-table.md)."""

from __future__ import annotations

import os
import secrets

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.store import schema as s
from tests.databases.jobs import mariadb_connect, pg_connect

pytestmark = pytest.mark.spark


def two_tables(rows1: int = 30, rows2: int = 20, splits: int = 3) -> str:
    """A FakeSource of two tables of different shapes, numbered by ``id``, keyed by it."""
    return f"""
  FakeSource {{
    plugin_output = "shop"
    tables_configs = [
      {{ row.num = {rows1}, split.num = {splits}, sequence.field = id,
         schema {{ table = "shop.orders", fields {{ id = bigint, item = string, price = double }},
                   primaryKey {{ name = pk_orders, columnNames = [id] }} }} }},
      {{ row.num = {rows2}, split.num = {splits}, sequence.field = id,
         schema {{ table = "shop.customers", fields {{ id = bigint, age = int }},
                   primaryKey {{ name = pk_customers, columnNames = [id] }} }} }}
    ]
  }}"""


def job(source: str, sink: str, env: str = "", transform: str = "") -> str:
    return f"""
env {{
  job.mode = BATCH
  job.retry.interval.seconds = 0
  {env}
}}
source {{ {source} }}
transform {{ {transform} }}
sink {{ {sink} }}
"""


def parquet_column(path: str, column: str) -> list:
    found = []
    for root, _dirs, names in os.walk(path):
        if "/." in root[len(path):]:
            continue
        for name in names:
            if name.endswith(".parquet"):
                found += pq.read_table(os.path.join(root, name)).column(column).to_pylist()
    return sorted(found)


def decisions(run) -> list:
    with run.store.read() as conn:
        return list(conn.execute(select(s.sink_manifests).where(s.sink_manifests.c.job_id == run.job_id)
                                 .where(s.sink_manifests.c.batch_id >= 0)))


CHECKPOINTED = "checkpoint.interval = 1000\n  micro-batch.max-rows = 16"


@pytest.mark.parametrize("env", ["", CHECKPOINTED], ids=["plain", "checkpointed"])
def test_each_table_lands_in_its_own_directory_once_with_one_decision_per_batch(local, tmp_path, env):
    out = tmp_path / "out"
    sink = f'LocalFile {{ path = "{out}/${{database_name}}/${{table_name}}", file_format_type = "parquet" }}'
    run = local.run(job(two_tables(), sink, env))
    assert run.status == "FINISHED", run.error
    assert parquet_column(str(out / "shop" / "orders"), "id") == list(range(30))
    assert parquet_column(str(out / "shop" / "customers"), "id") == list(range(20))
    assert parquet_column(str(out / "shop" / "customers"), "age") != []
    batches = {d.batch_id for d in decisions(run)}
    assert len(decisions(run)) == len(batches)          # one decision per batch, for both tables
    if env:
        assert len(batches) > 1                         # the tables took several micro-batches


def test_a_crash_with_one_table_published_publishes_the_other_and_nothing_twice(local, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setitem(failpoints._POINTS, "sink.table_published", f"once:raise:{tmp_path / 'crashed'}")
    sink = f'LocalFile {{ path = "{out}/${{table_name}}", file_format_type = "parquet" }}'
    run = local.run(job(two_tables(), sink, CHECKPOINTED))
    assert run.status == "FINISHED", run.error
    assert (tmp_path / "crashed").exists() and len(run.attempts()) == 2
    assert parquet_column(str(out / "orders"), "id") == list(range(30))
    assert parquet_column(str(out / "customers"), "id") == list(range(20))
    # the crashed batch, decided by the dead attempt and replayed by the next, is counted once
    assert sum(p.rows_written for p in run.pipelines()) == 50


def test_table_names_give_each_table_the_same_schema_and_console_names_the_table(local):
    source = """FakeSource {
      table-names = ["test.table1", "test.table2", "test.table3"]
      row.num = 2
      schema = { fields { name = string, age = int } }
    }"""
    run = local.run(job(source, "Console {}"))
    assert run.status == "FINISHED", run.error
    for table in ("test.table1", "test.table2", "test.table3"):
        assert f"table {table} output rowType: name<string>, age<int>" in run.stdout
        assert sum(line.startswith(f"table={table} rowIndex=") for line in run.stdout.splitlines()) == 2


def test_transforms_apply_to_each_table_and_merging_queries_are_refused_at_check(local, tmp_path):
    out = tmp_path / "out"
    transform = 'Sql { plugin_input = "shop", plugin_output = "kept", query = "select * from shop where id < 5" }'
    sink = f'LocalFile {{ plugin_input = "kept", path = "{out}/${{table_name}}", file_format_type = "parquet" }}'
    run = local.run(job(two_tables(), sink, CHECKPOINTED, transform))
    assert run.status == "FINISHED", run.error
    assert parquet_column(str(out / "orders"), "id") == list(range(5))
    assert parquet_column(str(out / "customers"), "id") == list(range(5))
    grouped = 'Sql { plugin_input = "shop", plugin_output = "kept", query = "select count(*) as n from shop" }'
    with pytest.raises(ConfigError, match="Sql cannot run on the rows of source\\[0\\] FakeSource, which reads "
                                          "several tables.*merges rows"):
        load_job_text(job(two_tables(), sink, CHECKPOINTED, grouped))


def assert_rules(orders: int = 30, names: str = '"shop.orders", "shop.customers"') -> str:
    return f"""Assert {{ rules {{
      tables_configs = [
        {{ table_path = "shop.orders",
           row_rules = [{{ rule_type = MIN_ROW, rule_value = {orders} }}, {{ rule_type = MAX_ROW, rule_value = {orders} }}],
           field_rules = [{{ field_name = item, field_type = string, field_value = [{{ rule_type = NOT_NULL }}] }}] }},
        {{ table_path = "shop.customers", row_rules = [{{ rule_type = MAX_ROW, rule_value = 20 }}] }}
      ]
      row_rules = [{{ rule_type = MIN_ROW, rule_value = 50 }}]
      table-names = [{names}]
    }} }}"""


def test_assert_checks_each_table_by_its_own_rules(local):
    assert local.run(job(two_tables(), assert_rules(), CHECKPOINTED)).status == "FINISHED"
    run = local.run(job(two_tables(), assert_rules(orders=31), CHECKPOINTED))
    assert run.status == "FAILED" and "MIN_ROW 31: 30 rows" in run.error
    run = local.run(job(two_tables(), assert_rules(names='"shop.orders", "shop.refunds"'), CHECKPOINTED))
    assert run.status == "FAILED" and "table-names: no rows of table shop.refunds" in run.error


# -- Jdbc: every table in one transaction with one commit record per batch ------------------------

SERVERS = {
    "postgresql": ("jdbc:postgresql://127.0.0.1:5432/test", "postgres", pg_connect),
    "mariadb": ("jdbc:mariadb://127.0.0.1:3306/test", "root", mariadb_connect),
}


def query(connect, sql: str) -> list[tuple]:
    with connect() as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        return [tuple(r) for r in cursor.fetchall()]


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_jdbc_writes_each_table_to_its_placeholder_target_with_one_commit_record_per_batch(local, server, monkeypatch,
                                                                                              tmp_path):
    url, user, connect = SERVERS[server]
    prefix = f"mt{secrets.token_hex(3)}_"
    naming = ('schema = "public"' if server == "postgresql" else 'database = "test"')
    sink = f"""Jdbc {{ url = "{url}", user = "{user}", password = "", {naming}
                   table = "{prefix}${{table_name}}", primary_keys = ["${{primary_key}}"] }}"""
    # the first attempt fails right after a batch commits: the retry resumes every table
    monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{tmp_path / 'crashed'}")
    try:
        run = local.run(job(two_tables(), sink, CHECKPOINTED))
        assert run.status == "FINISHED", run.error
        assert len(run.attempts()) == 2
        assert query(connect, f"SELECT id FROM {prefix}orders ORDER BY id") == [(i,) for i in range(30)]
        assert query(connect, f"SELECT id FROM {prefix}customers ORDER BY id") == [(i,) for i in range(20)]
        records = query(connect, "SELECT transaction_id, batch_id, row_count FROM seatide_sink_commits "
                                 f"WHERE sink_id LIKE '{run.job_id}%'")
        batches = [r for r in records if r[1] >= 0]
        assert len({r[1] for r in batches}) == len(batches) > 1          # one record per batch
        assert sum(r[2] for r in batches) == 50
        assert [r for r in records if r[1] == -1] == []    # APPEND_DATA destroys nothing: no save-mode record
    finally:
        with connect() as conn:
            for table in ("orders", "customers"):
                conn.cursor().execute(f"DROP TABLE IF EXISTS {prefix}{table}")


# -- Jdbc source: table_list ------------------------------------------------------------------------

@pytest.fixture
def pg_tables():
    """Three PostgreSQL tables of different shapes, dropped afterwards."""
    suffix = secrets.token_hex(3)
    names = [f"list_a_{suffix}", f"list_b_{suffix}", f"list_c_{suffix}"]
    with pg_connect() as pg:
        pg.execute(f"CREATE TABLE {names[0]} (id bigint PRIMARY KEY, name varchar(20), amount numeric(10, 2))")
        pg.execute(f"INSERT INTO {names[0]} SELECT g, 'a' || g, g * 1.5 FROM generate_series(1, 57) g")
        pg.execute(f"CREATE TABLE {names[1]} (k int PRIMARY KEY, born date)")
        pg.execute(f"INSERT INTO {names[1]} SELECT g, date '2024-01-01' + g FROM generate_series(1, 23) g")
        pg.execute(f"CREATE TABLE {names[2]} (id int PRIMARY KEY, flag boolean)")
        pg.execute(f"INSERT INTO {names[2]} SELECT g, g % 2 = 0 FROM generate_series(1, 10) g")
    yield names
    with pg_connect() as pg:
        for name in names:
            pg.execute(f"DROP TABLE IF EXISTS {name}")
    with mariadb_connect() as db, db.cursor() as cur:
        for name in names:
            cur.execute(f"DROP TABLE IF EXISTS copy_{name}")


@pytest.mark.parametrize("env", ["", CHECKPOINTED.replace("16", "20")], ids=["plain", "checkpointed"])
def test_jdbc_table_list_copies_each_table_with_its_own_query_into_its_own_target(local, pg_tables, env,
                                                                                 monkeypatch):
    from seatide.connectors.jdbc.target import JdbcTarget

    a, b, c = pg_tables
    reads, stage = [], JdbcTarget.stage

    def staged(self, df, *args):
        reads.append(df._jdf.queryExecution().analyzed().toString().count("JDBCRelation"))
        return stage(self, df, *args)

    monkeypatch.setattr(JdbcTarget, "stage", staged)
    source = f"""Jdbc {{
      url = "jdbc:postgresql://127.0.0.1:5432/test", user = "postgres", password = ""
      split.size = 10
      table_list = [
        {{ table_path = "test.public.{a}" }},
        {{ table_path = "public.{b}", query = "select k, born from {b} where k > 3", split.size = 5 }},
        {{ table_path = "{c}", partition_column = "id", partition_num = 2 }}
      ]
    }}"""
    sink = """Jdbc { url = "jdbc:mariadb://127.0.0.1:3306/test", user = "root", password = ""
                     database = "test", tablePrefix = "copy_" }"""
    run = local.run(job(source, sink, env))
    assert run.status == "FINISHED", run.error
    assert query(mariadb_connect, f"SELECT id, name, amount FROM copy_{a} ORDER BY id") == \
        query(pg_connect, f"SELECT id, name, amount FROM {a} ORDER BY id")
    assert query(mariadb_connect, f"SELECT k, born FROM copy_{b} ORDER BY k") == \
        query(pg_connect, f"SELECT k, born FROM {b} WHERE k > 3 ORDER BY k")
    assert query(mariadb_connect, f"SELECT id, flag FROM copy_{c} ORDER BY id") == \
        [(i, int(i % 2 == 0)) for i in range(1, 11)]
    # each table is written from its own read, never taken out of a union of every table (whose
    # analysis Spark repeats for each table: minutes before the first row at 100 tables)
    assert reads and set(reads) == {1}, reads
    # the catalog's primary key was taken for each created table
    keys = query(mariadb_connect, "SELECT table_name, column_name FROM information_schema.key_column_usage "
                 f"WHERE table_schema = 'test' AND table_name LIKE 'copy_list_%{a[-6:]}'")
    assert sorted(keys) == sorted([(f"copy_{a}", "id"), (f"copy_{b}", "k"), (f"copy_{c}", "id")])


# -- SeaTunnel-shaped job files (tests/databases/seatunnel_jobs) -------------------------------------

JOBS = os.path.join(os.path.dirname(__file__), "..", "databases", "seatunnel_jobs")


def seatunnel_job(name: str) -> str:
    with open(os.path.join(JOBS, name), encoding="utf-8") as handle:
        return handle.read()


def targets(config) -> dict[str, tuple]:
    """Each input table's target (database connected to, table as qualified) of the first sink."""
    sink = config.sinks[0].plugin
    return {route.name: (route.sink.spec().database, route.sink.spec().table) for route in sink.routes}


@pytest.fixture
def shop_databases(private_mariadb):
    """Two databases on the private MariaDB: a shop (member, purchase) and an audit one (Ledger)."""
    shop, audit = f"shop_{secrets.token_hex(3)}", f"audit_{secrets.token_hex(3)}"
    private_mariadb.execute(
        f"CREATE DATABASE {shop}", f"CREATE DATABASE {audit}",
        f"CREATE TABLE {shop}.member (id INT PRIMARY KEY, name VARCHAR(40), joined DATE)",
        f"CREATE TABLE {shop}.purchase (id BIGINT PRIMARY KEY, member_id INT, total DECIMAL(10, 2))",
        f"CREATE TABLE {audit}.Ledger (entry INT PRIMARY KEY, note TEXT)")
    yield shop, audit
    private_mariadb.execute(f"DROP DATABASE {shop}", f"DROP DATABASE {audit}")


def test_seatunnel_mysql_cdc_jobs_resolve_each_tables_target_as_seatunnel_does(private_mariadb, shop_databases):
    shop, audit = shop_databases
    port = str(private_mariadb.port)
    three = load_job_text(seatunnel_job("mysql_cdc_three_tables_to_mysql.conf"),
                          {"cdc_port": port, "shop_db": shop, "audit_db": audit})
    assert targets(three) == {f"{shop}.member": (f"{shop}_test", ("member_test",)),
                              f"{shop}.purchase": (f"{shop}_test", ("purchase_test",)),
                              f"{audit}.Ledger": (f"{audit}_test", ("Ledger_test",))}
    assert [r.sink.spec().primary_keys for r in three.sinks[0].plugin.routes] == [("id",), ("id",), ("entry",)]
    two = load_job_text(seatunnel_job("mysql_cdc_two_tables_to_mysql.conf"),
                        {"cdc_port": port, "shop_db": shop, "target_db": "copies"})
    assert targets(two) == {f"{shop}.member": ("copies", ("member",)), f"{shop}.purchase": ("copies", ("purchase",))}
    assert [r.sink.spec().primary_keys for r in two.sinks[0].plugin.routes] == [("id",), ("id",)]


def test_seatunnel_postgres_cdc_job_resolves_sink_prefixed_targets_in_its_schema(private_postgres):
    shop = f"shop_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {shop}")
    try:
        with private_postgres.connect(shop) as conn:
            conn.execute("CREATE TABLE member (id int PRIMARY KEY, name text)")
            conn.execute("CREATE TABLE purchase (id bigint PRIMARY KEY, total numeric(10, 2))")
        config = load_job_text(seatunnel_job("postgres_cdc_two_tables_to_postgres.conf"),
                               {"cdc_port": str(private_postgres.port), "shop_db": shop, "target_schema": "copies"})
        assert targets(config) == {f"{shop}.public.member": ("test", ("copies", "sink_member")),
                                   f"{shop}.public.purchase": ("test", ("copies", "sink_purchase"))}
    finally:
        with private_postgres.connect() as admin:
            admin.execute(f"DROP DATABASE {shop} WITH (FORCE)")


def test_seatunnel_jdbc_table_list_job_copies_both_tables(local):
    first, second = f"tl_one_{secrets.token_hex(3)}", f"tl_two_{secrets.token_hex(3)}"
    with pg_connect() as pg:
        pg.execute(f"CREATE TABLE {first} (id int PRIMARY KEY, label text)")
        pg.execute(f"INSERT INTO {first} SELECT g, 'l' || g FROM generate_series(1, 40) g")
        pg.execute(f"CREATE TABLE {second} (id int PRIMARY KEY, name text, extra text)")
        pg.execute(f"INSERT INTO {second} SELECT g, 'n' || g, 'x' FROM generate_series(90, 130) g")
    try:
        run = local.run(seatunnel_job("jdbc_table_list_to_mysql.conf"), {"first_table": first, "second_table": second})
        assert run.status == "FINISHED", run.error
        assert query(mariadb_connect, f"SELECT id, label FROM {first} ORDER BY id") == \
            [(i, f"l{i}") for i in range(1, 41)]
        assert query(mariadb_connect, f"SELECT * FROM {second} ORDER BY id") == \
            [(i, f"n{i}") for i in range(101, 131)]          # the entry's own query: two columns, id > 100
    finally:
        with pg_connect() as pg:
            pg.execute(f"DROP TABLE {first}")
            pg.execute(f"DROP TABLE {second}")
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {first}")
            cur.execute(f"DROP TABLE IF EXISTS {second}")


def test_every_placeholder_is_filled_per_table_with_defaults_where_a_table_has_no_value():
    source = """FakeSource {
      tables_configs = [
        { schema { table = "sales.eu.orders", fields { id = bigint, code = string, total = double },
                   primaryKey { name = pk, columnNames = [id] },
                   constraintKeys = [{ constraintName = uk_code, constraintType = UNIQUE_KEY,
                                       constraintColumns = [{ columnName = code }] }] } },
        { schema { table = "audit.events", fields { seq = int, note = string } } }
      ]
    }"""
    path = ("/out/${database_name}/${schema_name:none}/${table_name}/${schema_full_name}/${table_full_name}/"
            "${primary_key:nokey}/${unique_key:nounique}/${field_names}")
    config = load_job_text(job(source, f'LocalFile {{ path = "{path}" }}'))
    roots = {route.name: route.sink.spec().root for route in config.sinks[0].plugin.routes}
    assert roots == {
        "sales.eu.orders": "/out/sales/eu/orders/sales.eu/sales.eu.orders/id/code/id,code,total",
        "audit.events": "/out/audit/none/events/audit/audit.events/nokey/nounique/seq,note"}
    with pytest.raises(ConfigError, match=r"\$\{primary_key\} cannot be filled.*\(writing table audit.events\)"):
        load_job_text(job(source, 'LocalFile { path = "/out/${primary_key}" }'))
