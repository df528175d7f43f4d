"""Iceberg jobs end to end through the real control plane (tests/e2e/harness.py): a crash right after the
catalog commit, then the job's retry resumes from its checkpoint and the batch is found, not written
again; Jdbc (PostgreSQL) -> Iceberg; Iceberg -> LocalFile; Postgres-CDC and MySQL-CDC -> Iceberg with
updates and deletes (copy-on-write, and merge-on-read for MySQL-CDC), the table equal to the source at the end.
Tables are read back by pyiceberg's scan, merge-on-read ones by SeaTide's own reader."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import time
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

from seatide import failpoints
from seatide.store.jobs import request_stop
from tests.connectors.iceberg_helpers import PG_ADMIN, batch_snapshots, read_back, rows_of, table_of
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

CATALOGS = {
    "hadoop": lambda tmp: {"type": "hadoop", "warehouse": f"file://{tmp}/warehouse"},
    "jdbc-sqlite": lambda tmp: {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp}/catalog.db", "warehouse": f"file://{tmp}/wh"},
}


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


def hocon(config: dict) -> str:
    return "{ " + ", ".join(f'"{k}" = "{v}"' for k, v in config.items()) + " }"


def crash_once_after_commit(monkeypatch, tmp_path) -> str:
    """The first Iceberg commit of the test raises right after the catalog committed it: the attempt
    dies there (before the runtime's log and Spark's commit), as a killed driver would."""
    marker = str(tmp_path / "crashed")
    monkeypatch.setitem(failpoints._POINTS, "iceberg.after_commit", f"once:raise:{marker}")
    return marker


@pytest.mark.parametrize("kind", sorted(CATALOGS))
def test_fake_to_iceberg_resumes_after_a_crash_past_the_commit_with_every_row_once(local, tmp_path, monkeypatch,
                                                                                  kind):
    config = CATALOGS[kind](tmp_path)
    marker = crash_once_after_commit(monkeypatch, tmp_path)
    text = f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 300, job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 900, split.num = 3, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string, score = double }} }} }} }}
sink {{ Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {hocon(config)} }} }}
"""
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    assert os.path.exists(marker) and len(run.attempts()) == 2, "the first attempt died after its first commit"
    ids = [r[0] for r in rows_of(config, columns=("id",))]
    assert ids == list(range(900))
    marks = batch_snapshots(config)
    assert len(marks) == 3 and len(set(marks)) == 3, marks     # one snapshot per batch, none twice


def test_jdbc_postgres_to_iceberg_then_iceberg_to_local_file(local, tmp_path):
    """A PostgreSQL table into Iceberg (its JDBC catalog in the same PostgreSQL), then the Iceberg
    table into parquet files: values of each type arrive unchanged."""
    from sqlalchemy import create_engine, text

    table = f"src_{secrets.token_hex(3)}"
    engine = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, price numeric(10,2), "
                          "at timestamp, day date, ok boolean)"))
        conn.execute(text(f"INSERT INTO {table} SELECT g, 'n' || g, g * 1.25, timestamp '2024-01-01 10:00' + "
                          "g * interval '1 hour', date '2024-02-01' + g, g % 2 = 0 FROM generate_series(1, 50) g"))
    config = {"type": "jdbc", "uri": "jdbc:postgresql://127.0.0.1:5432/test", "jdbc.user": "postgres",
              "warehouse": f"file://{tmp_path}/wh"}
    namespace = f"ns_{secrets.token_hex(3)}"
    try:
        run = local.run(f"""
env {{ job.mode = BATCH }}
source {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", user = postgres, password = "", table_path = "public.{table}" }} }}
sink {{ Iceberg {{ catalog_name = pg_lake, namespace = {namespace}, table = copy, iceberg.catalog.config = {hocon(config)},
                  iceberg.table.primary-keys = "id" }} }}
""")
        assert run.status == "FINISHED", run.error
        from seatide.connectors.iceberg.catalogs import load_catalog

        iceberg = load_catalog("pg_lake", config).load_table(f"{namespace}.copy")
        rows = sorted(iceberg.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert len(rows) == 50
        assert rows[0] == {"id": 1, "name": "n1", "price": Decimal("1.25"), "at": dt.datetime(2024, 1, 1, 11, 0),
                           "day": dt.date(2024, 2, 2), "ok": False}
        assert iceberg.schema().identifier_field_names() == {"id"}

        out = str(tmp_path / "out")
        run = local.run(f"""
env {{ job.mode = BATCH }}
source {{ Iceberg {{ catalog_name = pg_lake, namespace = {namespace}, table = copy, iceberg.catalog.config = {hocon(config)} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = parquet }} }}
""")
        assert run.status == "FINISHED", run.error
        files = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".parquet")]
        copied = sorted((r for f in files for r in pq.read_table(f).to_pylist()), key=lambda r: r["id"])
        assert copied == rows
    finally:
        with engine.connect() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
            conn.execute(text("DELETE FROM iceberg_tables WHERE catalog_name = 'pg_lake'"))
        engine.dispose()


def append(config: dict, ids) -> int:
    import pyarrow as pa

    table = table_of(config)
    table.append(pa.table({"id": pa.array(list(ids), pa.int64()), "name": [f"n{i}" for i in ids]},
                          schema=table.schema().as_arrow()))
    return table_of(config).metadata.current_snapshot().snapshot_id


def make_table(config: dict) -> None:
    import pyarrow as pa

    from seatide.connectors.iceberg.catalogs import load_catalog

    catalog = load_catalog("default", config)
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", pa.schema([("id", pa.int64()), ("name", pa.large_string())]))


def parquet_rows(out: str) -> list[tuple]:
    files = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".parquet")] if os.path.isdir(out) else []
    return sorted(tuple(r.values()) for f in files for r in pq.read_table(f).to_pylist())


def test_iceberg_source_reads_snapshots_by_id_time_and_history_in_micro_batches(local, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    make_table(config)
    first = append(config, range(0, 10))
    time.sleep(0.01)
    second = append(config, range(10, 20))
    at_second = table_of(config).metadata.snapshot_by_id(second).timestamp_ms
    append(config, range(20, 25))
    source = f"catalog_name = default, namespace = ns, table = t, iceberg.catalog.config = {hocon(config)}"

    def copy(options: str, env: str = "job.mode = BATCH") -> list[tuple]:
        out = str(tmp_path / f"out{secrets.token_hex(3)}")
        run = local.run(f"env {{ {env} }}\nsource {{ Iceberg {{ {source}, {options} }} }}\n"
                        f"sink {{ LocalFile {{ path = \"{out}\", file_format_type = parquet }} }}")
        assert run.status == "FINISHED", run.error
        return parquet_rows(out)

    assert copy(f"use_snapshot_id = {first}") == [(i, f"n{i}") for i in range(10)]
    assert copy(f"use_snapshot_timestamp = {at_second}") == [(i, f"n{i}") for i in range(20)]
    assert copy(f"start_snapshot_id = {first}, end_snapshot_id = {second}") == [(i, f"n{i}") for i in range(10, 20)]
    assert copy('schema = { fields { NAME = string } }') == sorted((f"n{i}",) for i in range(25))
    # micro-batches of at most 6 rows through the whole history: the checkpointed position is a snapshot
    micro = "job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 6"
    assert copy("stream_scan_strategy = FROM_EARLIEST_SNAPSHOT", micro) == [(i, f"n{i}") for i in range(25)]
    assert copy("stream_scan_strategy = TABLE_SCAN_THEN_INCREMENTAL", micro) == [(i, f"n{i}") for i in range(25)]
    assert copy(f"stream_scan_strategy = FROM_SNAPSHOT_ID, start_snapshot_id = {second}", micro) == \
        [(i, f"n{i}") for i in range(10, 25)]
    # without a strategy a checkpointed BATCH job reads what a plain one reads (the default is a stream's)
    assert copy(f"start_snapshot_id = {first}", micro) == [(i, f"n{i}") for i in range(10, 25)]


def test_streaming_iceberg_source_picks_up_new_snapshots(local, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    make_table(config)
    append(config, range(0, 3))
    out = str(tmp_path / "out")
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 }}
source {{ Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {hocon(config)} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = parquet }} }}
"""

    def append_then_stop(store, job_id):
        deadline = time.monotonic() + 240
        while len(parquet_rows(out)) < 3 and time.monotonic() < deadline:   # FROM_LATEST_SNAPSHOT: 0-2
            time.sleep(0.2)
        append(config, range(3, 7))
        append(config, range(7, 9))
        while len(parquet_rows(out)) < 9 and time.monotonic() < deadline:
            time.sleep(0.2)
        request_stop(store, job_id, savepoint=False, actor="test")

    run = local.run(text, stop_after=append_then_stop)
    assert run.status == "CANCELED", run.error
    assert parquet_rows(out) == [(i, f"n{i}") for i in range(9)]


# -- change data capture into Iceberg ---------------------------------------------------------

def cdc_into_iceberg(local, tmp_path, monkeypatch, source_block: str, source_rows, change,
                     mode: str = "copy-on-write") -> None:
    """A STREAMING CDC job into an upserting Iceberg table: it crashes right after its first
    catalog commit (the snapshot), resumes from its checkpoint, then applies ``change()``'s
    inserts, updates and deletes. The job is stopped once the table equals the source, which
    it must do; every snapshot belongs to one batch."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    marker = crash_once_after_commit(monkeypatch, tmp_path)
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500, job.retry.times = 3, job.retry.interval.seconds = 0 }}
source {{ {source_block} }}
sink {{ Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {hocon(config)},
                  iceberg.table.primary-keys = "id", iceberg.table.upsert-mode-enabled = true,
                  iceberg.table.write-props = {{ "write.upsert.mode" = "{mode}" }} }} }}
"""
    seen = {}

    def table_rows():
        try:
            # merge-on-read: equality deletes, which only SeaTide's own reader applies
            rows = rows_of(config) if mode == "copy-on-write" else read_back(local.spark, config)
            return {r[0]: r for r in rows}
        except Exception:     # not created yet
            return None

    def equal_then_stop(store, job_id):
        # The harness starts this with each attempt and waits for it when the attempt ends: the
        # first attempt's copy only waits for its crash.
        deadline = time.monotonic() + 300
        if not os.path.exists(marker):
            while not os.path.exists(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            return
        while table_rows() != source_rows() and time.monotonic() < deadline:
            time.sleep(0.3)
        seen["snapshot"] = table_rows() == source_rows()
        change()
        while table_rows() != source_rows() and time.monotonic() < deadline:
            time.sleep(0.3)
        seen["changes"] = table_rows() == source_rows()
        request_stop(store, job_id, savepoint=False, actor="test")

    run = local.run(text, stop_after=equal_then_stop)
    assert run.status == "CANCELED", run.error
    assert os.path.exists(marker), "the job crashed once right after a commit"
    assert seen == {"snapshot": True, "changes": True}, (table_rows(), source_rows())
    marks = [m for m in batch_snapshots(config) if m]
    assert len(marks) == len(set(marks)) >= 2, marks
    table = table_of(config)
    deletes = [m for m in table.metadata.current_snapshot().manifests(table.io) if m.content.name == "DELETES"]
    assert bool(deletes) == (mode == "merge-on-read"), f"{mode}: delete manifests {deletes}"


def test_postgres_cdc_into_iceberg_equals_the_source_across_a_crash(local, tmp_path, monkeypatch, private_postgres):
    name = f"ice_cdc_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = private_postgres.connect(name)
    try:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2))")
        conn.execute("ALTER TABLE items REPLICA IDENTITY FULL")
        conn.execute("INSERT INTO items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 40) g")

        def source_rows():
            return {r[0]: tuple(r) for r in conn.execute("SELECT id, name, price FROM items").fetchall()}

        def change():
            conn.execute("INSERT INTO items VALUES (100, 'new', 9.99)")
            conn.execute("UPDATE items SET name = 'renamed', price = price + 1 WHERE id % 3 = 0")
            conn.execute("UPDATE items SET id = id + 1000 WHERE id = 2")      # the key moves
            conn.execute("DELETE FROM items WHERE id % 5 = 0")

        url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{name}"
        block = (f'Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "", '
                 f'table-names = ["{name}.public.items"] }}')
        cdc_into_iceberg(local, tmp_path, monkeypatch, block, source_rows, change)
    finally:
        conn.close()
        from seatide.connectors.postgres_cdc import slot

        with private_postgres.connect() as admin:
            for slot_name, in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                            (name,)).fetchall():
                slot.drop(admin, slot_name)
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_mysql_cdc_into_iceberg_equals_the_source_across_a_crash(local, tmp_path, monkeypatch, private_mariadb, mode):
    database = f"ice_cdc_{secrets.token_hex(3)}"
    private_mariadb.execute(f"CREATE DATABASE {database}",
                            f"CREATE TABLE {database}.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2))",
                            *[f"INSERT INTO {database}.items VALUES ({i}, 'item {i}', {i * 1.5})" for i in range(1, 41)])

    def source_rows():
        with private_mariadb.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT id, name, price FROM {database}.items")
            return {r[0]: tuple(r) for r in cur.fetchall()}

    def change():
        private_mariadb.execute(f"INSERT INTO {database}.items VALUES (100, 'new', 9.99)",
                                f"UPDATE {database}.items SET name = 'renamed', price = price + 1 WHERE id % 3 = 0",
                                f"UPDATE {database}.items SET id = id + 1000 WHERE id = 2",
                                f"DELETE FROM {database}.items WHERE id % 5 = 0")

    block = (f'MySQL-CDC {{ base-url = "{private_mariadb.url}", username = "{private_mariadb.user}", '
             f'password = "{private_mariadb.password}", table-names = ["{database}.items"] }}')
    try:
        cdc_into_iceberg(local, tmp_path, monkeypatch, block, source_rows, change, mode)
    finally:
        private_mariadb.execute(f"DROP DATABASE {database}")
