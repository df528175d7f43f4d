"""A one-table Postgres-CDC job into MariaDB: its small change batches are collected on the driver
and staged by the sink's own connection inside the batch's transaction, as a multi-table job's are
(runtime.local_batch), not by a Spark JDBC write; a batch whose commit landed in the target before
its driver died is not applied again by the next attempt. Real private PostgreSQL, the shared
MariaDB, the real control plane and runtime in the shared SparkSession (tests/e2e/harness.py)."""

from __future__ import annotations

import logging
import secrets

import pytest

from seatide import failpoints
from seatide.store.jobs import request_stop
from tests.databases.jobs import mariadb_connect
from tests.e2e.harness import wait_for

pytestmark = pytest.mark.spark


@pytest.fixture
def shop(private_postgres):
    name = f"one_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    with private_postgres.connect(name) as conn:
        conn.execute("CREATE TABLE item (id int PRIMARY KEY, name text, amount numeric(10, 2))")
        conn.execute("INSERT INTO item SELECT g, 'i' || g, g / 4.0 FROM generate_series(1, 20) g")
    yield private_postgres, name
    private_postgres.drop_database(name)


def test_small_change_batches_of_one_table_are_staged_on_the_driver_and_a_replay_applies_nothing_twice(
        local, shop, monkeypatch, tmp_path, caplog):
    server, name = shop
    target = f"one_{secrets.token_hex(3)}"
    job = f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 500 }}
source {{ Postgres-CDC {{ base-url = "jdbc:postgresql://127.0.0.1:{server.port}/{name}", username = "postgres",
                         password = "", table-names = ["{name}.public.item"] }} }}
sink {{ Jdbc {{ url = "jdbc:mariadb://127.0.0.1:3306/test", user = "root", password = "", database = "test",
               table = "{target}", primary_keys = ["id"] }} }}
"""
    crashed = tmp_path / "crashed"

    def source_rows():
        with server.connect(name) as conn:
            return sorted((r[0], r[1], str(r[2])) for r in conn.execute("SELECT id, name, amount FROM item"))

    def target_rows():
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"SELECT id, name, amount FROM test.{target}")
            return sorted((r[0], r[1], str(r[2])) for r in cur.fetchall())

    def drive(store, job_id):
        try:
            wait_for(lambda: target_rows() == source_rows(), "the snapshot in the target")
            # the next batch's commit lands in MariaDB, then its driver dies before its own log has it
            monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", f"once:raise:{crashed}")
            with server.connect(name) as conn:
                conn.execute("INSERT INTO item SELECT g, 'i' || g, g / 4.0 FROM generate_series(21, 60) g")
                conn.execute("UPDATE item SET name = 'changed', amount = amount + 1 WHERE id % 3 = 0")
                conn.execute("DELETE FROM item WHERE id IN (2, 40)")
            wait_for(lambda: crashed.exists() and target_rows() == source_rows(), "the changes in the target")
            drive.ok = True
        finally:
            request_stop(store, job_id, savepoint=False, actor="test")

    drive.ok = False
    with caplog.at_level(logging.INFO, logger="seatide.connectors.jdbc.targets"):
        run = local.run(job, stop_after=drive)
    try:
        assert drive.ok and run.status == "CANCELED", run.error
        staged = [r.getMessage() for r in caplog.records if "collected on the driver" in r.getMessage()]
        assert any("(1 collected on the driver)" in m for m in staged), staged   # no Spark write for them
        assert target_rows() == source_rows()
    finally:
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS test.{target}")
