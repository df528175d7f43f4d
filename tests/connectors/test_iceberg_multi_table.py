"""Multi-table jobs into Iceberg (docs/connectors/iceberg.md, *Multi-table*): each table of the input
lands in the table its placeholders name, created from its own catalog; one decision per micro-batch
covers every table, then each table gets one snapshot carrying the batch's transaction id. A crash
with some tables committed leaves every row once; a multi-table CDC job upserts each table by its
own primary key."""

from __future__ import annotations

import json
import os
import secrets
import time

import pytest

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.store.jobs import request_stop
from tests.connectors.iceberg_helpers import batch_snapshots, rows_of, table_of
from tests.connectors.test_iceberg_jobs import CATALOGS, hocon
from tests.e2e.harness import InProcessCluster
from tests.e2e.test_multi_table import CHECKPOINTED, decisions, job, two_tables

pytestmark = pytest.mark.spark


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


@pytest.mark.parametrize("kind", sorted(CATALOGS))
def test_each_table_gets_its_own_iceberg_table_and_a_crash_between_tables_commits_nothing_twice(
        local, tmp_path, monkeypatch, kind):
    config = CATALOGS[kind](tmp_path)
    marker = tmp_path / "crashed"
    # an attempt dies with one table of a batch committed and the other not yet; on the hadoop
    # catalog (one attempt less elsewhere: CI time) the one before dies before its first decision
    undecided = kind == "hadoop"
    if undecided:
        monkeypatch.setitem(failpoints._POINTS, "sink.before_decision", f"once:raise:{tmp_path / 'undecided'}")
    monkeypatch.setitem(failpoints._POINTS, "sink.table_published", f"once:raise:{marker}")
    sink = (f'Iceberg {{ namespace = "${{database_name}}_ns", table = "${{table_name}}", '
            f'iceberg.catalog.config = {hocon(config)} }}')
    run = local.run(job(two_tables(), sink, CHECKPOINTED))
    assert run.status == "FINISHED", run.error
    assert marker.exists() and len(run.attempts()) == 2 + undecided, "attempts died where the failpoints are"
    assert [r[0] for r in rows_of(config, "shop_ns.orders", ("id",))] == list(range(30))
    assert [r[0] for r in rows_of(config, "shop_ns.customers", ("id",))] == list(range(20))
    # each table created from its own fields, its primary key as identifier fields
    customers = table_of(config, "shop_ns.customers").metadata.schema()
    assert [f.name for f in customers.fields] == ["id", "age"]
    assert [customers.find_column_name(i) for i in customers.identifier_field_ids] == ["id"]
    orders, customers = batch_snapshots(config, "shop_ns.orders"), batch_snapshots(config, "shop_ns.customers")
    assert len(orders) == len(set(orders)) > 1 and len(customers) == len(set(customers)) > 1, (orders, customers)
    # one decision per batch for both tables; each table's snapshot of a batch carries the batch's id
    assert len(decisions(run)) == len({d.batch_id for d in decisions(run)})
    for name in ("shop_ns.orders", "shop_ns.customers"):     # staged files no decision took are removed
        table = table_of(config, name)
        referenced = {os.path.basename(s.summary.additional_properties["seatide.staging"])
                      for s in table.metadata.snapshots}
        data = table.metadata.location.removeprefix("file://") + "/data"
        assert {d for d in os.listdir(data) if d.startswith("seatide-")} == referenced, name
    first = min(decisions(run), key=lambda d: d.batch_id)      # the batch the first attempt died in
    assert sorted(key.rsplit(":", 1)[1] for key in json.loads(first.manifest)["publish"]["targets"]) == [
        "shop_ns.customers", "shop_ns.orders"]
    decided = {d.transaction_id for d in decisions(run)}
    assert set(orders) <= decided and set(customers) <= decided and set(orders) & set(customers)


def test_save_modes_apply_to_each_table(local, tmp_path):
    config = CATALOGS["hadoop"](tmp_path)
    sink = (f'Iceberg {{ namespace = ns, table = "t_${{table_name}}", iceberg.catalog.config = {hocon(config)}, '
            f'data_save_mode = DROP_DATA }}')
    for _ in range(2):       # the second run drops what the first wrote, table by table
        run = local.run(job(two_tables(rows1=5, rows2=3), sink))
        assert run.status == "FINISHED", run.error
    assert [r[0] for r in rows_of(config, "ns.t_orders", ("id",))] == list(range(5))
    assert [r[0] for r in rows_of(config, "ns.t_customers", ("id",))] == list(range(3))
    missing = (f'Iceberg {{ namespace = ns, table = "u_${{table_name}}", iceberg.catalog.config = {hocon(config)}, '
               f'schema_save_mode = ERROR_WHEN_SCHEMA_NOT_EXIST }}')
    run = local.run(job(two_tables(rows1=5, rows2=3), missing))
    assert run.status == "FAILED" and "table ns.u_orders does not exist" in (run.error or ""), run.error


def test_postgres_cdc_of_two_tables_into_iceberg_upserts_each_by_its_own_key(local, tmp_path, private_postgres):
    name = f"ice_mt_{secrets.token_hex(3)}"
    config = CATALOGS["jdbc-sqlite"](tmp_path)
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = private_postgres.connect(name)
    try:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2))")
        conn.execute("CREATE TABLE people (code text PRIMARY KEY, age int)")
        for table in ("items", "people"):
            conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
        conn.execute("INSERT INTO items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 30) g")
        conn.execute("INSERT INTO people SELECT 'p' || g, g FROM generate_series(1, 20) g")
        queries = {"items": "SELECT id, name, price FROM items", "people": "SELECT code, age FROM people"}

        def source(table):
            return sorted(tuple(r) for r in conn.execute(queries[table]).fetchall())

        def target(table):
            try:
                return rows_of(config, f"public.{table}", ("id", "name", "price") if table == "items" else
                               ("code", "age"))
            except Exception:      # not created yet
                return None

        def equal():
            return all(target(t) == source(t) for t in queries)

        seen = {}

        def change_then_stop(store, job_id):
            deadline = time.monotonic() + 240
            while not equal() and time.monotonic() < deadline:
                time.sleep(0.3)
            seen["snapshot"] = equal()
            conn.execute("INSERT INTO items VALUES (100, 'new', 9.99)")
            conn.execute("UPDATE items SET name = 'renamed', price = price + 1 WHERE id % 3 = 0")
            conn.execute("DELETE FROM items WHERE id % 5 = 0")
            conn.execute("UPDATE people SET age = age + 100 WHERE age % 2 = 0")
            conn.execute("UPDATE people SET code = 'moved' WHERE code = 'p3'")      # the key moves
            conn.execute("DELETE FROM people WHERE age = 7")
            while not equal() and time.monotonic() < deadline:
                time.sleep(0.3)
            seen["changes"] = equal()
            request_stop(store, job_id, savepoint=False, actor="test")

        url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{name}"
        text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500, job.retry.interval.seconds = 0 }}
source {{ Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "",
                         table-names = ["{name}.public.items", "{name}.public.people"] }} }}
sink {{ Iceberg {{ namespace = "${{schema_name}}", table = "${{table_name}}",
                  iceberg.catalog.config = {hocon(config)}, iceberg.table.upsert-mode-enabled = true }} }}
"""
        run = local.run(text, stop_after=change_then_stop)
        assert run.status == "CANCELED", run.error
        assert seen == {"snapshot": True, "changes": True}, {t: (target(t), source(t)) for t in queries}
        for table in queries:
            marks = [m for m in batch_snapshots(config, f"public.{table}") if m]
            assert len(marks) == len(set(marks)) >= 2, marks
    finally:
        conn.close()
        from seatide.connectors.postgres_cdc import slot

        with private_postgres.connect() as admin:
            for slot_name, in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                            (name,)).fetchall():
                slot.drop(admin, slot_name)
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_tables_named_alike_land_in_one_target_with_one_snapshot_per_batch(local, tmp_path):
    config = CATALOGS["hadoop"](tmp_path)
    source = """FakeSource {
      table-names = ["test.shard1", "test.shard2"]
      row.num = 3
      schema = { fields { name = string, age = int } }
    }"""
    sink = f'Iceberg {{ namespace = "${{database_name}}", table = all, iceberg.catalog.config = {hocon(config)} }}'
    run = local.run(job(source, sink))
    assert run.status == "FINISHED", run.error
    assert len(rows_of(config, "test.all")) == 6
    assert len(batch_snapshots(config, "test.all")) == 1


def test_upserts_into_a_table_without_a_key_are_refused_naming_the_table():
    source = two_tables().replace("primaryKey { name = pk_customers, columnNames = [id] }", "")
    sink = ('Iceberg { namespace = ns, table = "${table_name}", iceberg.table.upsert-mode-enabled = true, '
            'iceberg.catalog.config = { type = hadoop, warehouse = "/tmp/unused" } }')
    with pytest.raises(ConfigError, match="upsert-mode-enabled = true needs iceberg.table.primary-keys.*"
                                          "writing table shop.customers"):
        load_job_text(job(source, sink))
