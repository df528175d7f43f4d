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
from seatide.config.loader import ConfigError, load_job_text
from seatide.store import schema as s
from tests.databases.jobs import mariadb_connect, pg_connect
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


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
        assert len([r for r in records if r[1] == -1]) == 2             # save modes: one per table
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
def test_jdbc_table_list_copies_each_table_with_its_own_query_into_its_own_target(local, pg_tables, env):
    a, b, c = pg_tables
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
    # the catalog's primary key was taken for each created table
    keys = query(mariadb_connect, "SELECT table_name, column_name FROM information_schema.key_column_usage "
                 f"WHERE table_schema = 'test' AND table_name LIKE 'copy_list_%{a[-6:]}'")
    assert sorted(keys) == sorted([(f"copy_{a}", "id"), (f"copy_{b}", "k"), (f"copy_{c}", "id")])
