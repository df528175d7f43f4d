"""Change data capture jobs as a user runs them: `seatide run` processes, a driver killed with
SIGKILL mid-stream, positions lost while a job is stopped, slots removed when a job ends for good.

Sources are private servers with logical decoding / binlog on (tests/connectors/cdc_servers.py,
cdc_mysql_server.py); targets are the machine's PostgreSQL and MariaDB through the Jdbc sink.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess

import pytest

from tests.cli.test_local_run import ROOT, SEATIDE, seatide
from seatide.testing.driver_processes import driver_pids
from seatide.testing.cluster import Cluster, wait_for
from tests.databases.jobs import MARIADB_URL, PG_URL, mariadb_connect, pg_connect
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster


def _job(source: str, sink: str) -> str:
    return f"""
env {{
  job.mode = "STREAMING"
  checkpoint.interval = 1000
  job.retry.times = 3
  job.retry.interval.seconds = 1
}}
source {{
{source}
}}
sink {{
{sink}
}}
"""


def _postgres_cdc(server, table: str) -> str:
    return f"""  Postgres-CDC {{
    base-url = "{server.url}"
    username = "postgres"
    password = ""
    database-names = ["postgres"]
    schema-names = ["public"]
    table-names = ["postgres.public.{table}"]
  }}"""


def _mysql_cdc(server, table: str) -> str:
    return f"""  MySQL-CDC {{
    base-url = "{server.url}"
    username = "{server.user}"
    password = "{server.password}"
    database-names = ["test"]
    table-names = ["test.{table}"]
    server-id = 5400
  }}"""


def _jdbc_sink(url: str, user: str, table: str) -> str:
    return f"""  Jdbc {{
    url = "{url}"
    user = "{user}"
    password = ""
    database = "test"
    table = "{table}"
    generate_sink_sql = true
    primary_keys = ["id"]
  }}"""


class Replica:
    """A source table and the target table a CDC job keeps identical to it."""

    def __init__(self, execute_source, read_source, read_target):
        self.execute_source, self._read_source, self._read_target = execute_source, read_source, read_target

    def same(self) -> bool:
        try:
            return self._read_source() == self._read_target()
        except Exception:   # the target table is not created yet
            return False

    def apply(self, *statements: str) -> None:
        self.execute_source(*statements)


def _rows(cursor) -> list[tuple]:
    return sorted((int(i), str(n), float(a)) for i, n, a in cursor.fetchall())


@pytest.fixture
def postgres_to_mariadb(private_postgres):
    table = f"cdc_{secrets.token_hex(4)}"
    with private_postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name varchar(40), amount numeric(10, 2))")
        conn.execute(f"INSERT INTO {table} SELECT g, 'n' || g, g * 0.5 FROM generate_series(0, 99) AS g")

    def execute(*statements):
        with private_postgres.connect() as conn:
            for statement in statements:
                conn.execute(statement)

    def read_source():
        with private_postgres.connect() as conn:
            return _rows(conn.execute(f"SELECT id, name, amount FROM {table}"))

    def read_target():
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"SELECT id, name, amount FROM {table}")
            return _rows(cur)

    job = _job(_postgres_cdc(private_postgres, table), _jdbc_sink(MARIADB_URL, "root", table))
    yield job, table, Replica(execute, read_source, read_target)
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture
def mariadb_to_postgres(private_mariadb):
    table = f"cdc_{secrets.token_hex(4)}"
    private_mariadb.execute(
        f"CREATE TABLE {table} (id int PRIMARY KEY, name varchar(40), amount decimal(10, 2))",
        f"INSERT INTO {table} SELECT seq, concat('n', seq), seq * 0.5 FROM seq_0_to_99")

    def read_source():
        with private_mariadb.connect() as db, db.cursor() as cur:
            cur.execute(f"SELECT id, name, amount FROM {table}")
            return _rows(cur)

    def read_target():
        with pg_connect() as pg:
            return _rows(pg.execute(f"SELECT id, name, amount FROM {table}"))

    job = _job(_mysql_cdc(private_mariadb, table), _jdbc_sink(PG_URL, "postgres", table))
    yield job, table, Replica(private_mariadb.execute, read_source, read_target)
    with pg_connect() as pg:
        pg.execute(f"DROP TABLE IF EXISTS {table}")


def _start(tmp_path, job: str, job_id: str):
    conf = tmp_path / f"{job_id}.conf"
    conf.write_text(job)
    data_dir = str(tmp_path / "d")
    proc = subprocess.Popen([*SEATIDE, "run", str(conf), "--job-id", job_id, "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    return proc, data_dir


def _stop(proc) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    return out, err


def _job_row(data_dir: str, job_id: str):
    from seatide.store.address import default_store_url
    from seatide.store.db import open_store
    from seatide.store.views import job_info

    store = open_store(default_store_url(data_dir))
    try:
        with store.read() as conn:
            return job_info(conn, job_id)
    finally:
        store.dispose()


def _kill_driver_then_change_and_converge(tmp_path, job, table, replica, job_id):
    proc, data_dir = _start(tmp_path, job, job_id)
    try:
        wait_for(replica.same, 240, message="the snapshot copied")
        replica.apply(f"INSERT INTO {table} (id, name, amount) VALUES " +
                      ", ".join(f"({i}, 'n{i}', {i}.25)" for i in range(100, 150)),
                      f"UPDATE {table} SET name = concat(name, '-u') WHERE id % 10 = 0",
                      f"DELETE FROM {table} WHERE id % 7 = 0 AND id < 100")
        wait_for(replica.same, 120, message="inserts, updates and deletes applied")
        first = driver_pids(job_id)
        assert len(first) == 1
        os.kill(first[0], signal.SIGKILL)
        replica.apply(f"INSERT INTO {table} (id, name, amount) VALUES " +
                      ", ".join(f"({i}, 'm{i}', {i}.75)" for i in range(150, 200)),
                      f"UPDATE {table} SET amount = amount + 1 WHERE id % 3 = 0",
                      f"DELETE FROM {table} WHERE id BETWEEN 100 AND 110")
        wait_for(lambda: driver_pids(job_id) not in ([], first), 120, message="a new driver")
        wait_for(replica.same, 180, message="the target identical to the source after the restart")
        info = _job_row(data_dir, job_id)
        assert info["jobStatus"] == "RUNNING" and info["checkpoint"]["restored"] >= 1
    finally:
        if proc.poll() is None:
            _stop(proc)


# In the soak set (bash scripts/test -m soak): CI time; CDC across a driver kill stays in CI through the multi-table CDC jobs
@pytest.mark.soak
def test_postgres_cdc_keeps_a_mariadb_replica_identical_across_a_driver_kill(tmp_path, postgres_to_mariadb):
    job, table, replica = postgres_to_mariadb
    _kill_driver_then_change_and_converge(tmp_path, job, table, replica, "pgcdc")


# In the soak set (bash scripts/test -m soak): CI time; CDC across a driver kill stays in CI through the multi-table CDC jobs
@pytest.mark.soak
def test_mysql_cdc_keeps_a_postgres_replica_identical_across_a_driver_kill(tmp_path, mariadb_to_postgres):
    job, table, replica = mariadb_to_postgres
    _kill_driver_then_change_and_converge(tmp_path, job, table, replica, "mycdc")


def _resume_fails_naming(data_dir: str, job_id: str, *expected: str) -> None:
    before = _job_row(data_dir, job_id)
    resumed = seatide("resume", job_id, "--data-dir", data_dir)
    assert resumed.returncode == 1, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    # a lost position is permanent: the resume is refused while it is answered, saying what is gone,
    # where, and the ways on (a new job, or --fallback fresh); nothing is recorded, so no driver of it
    # ever starts Spark to find it out
    for text in (*expected, "startup.mode", "submit it again", "--fallback fresh"):
        assert text in resumed.stderr, resumed.stderr[-2000:]
    info = _job_row(data_dir, job_id)
    assert (info["jobStatus"], len(info["attempts"])) == (before["jobStatus"], len(before["attempts"]))


def test_resume_after_the_slot_was_dropped_fails_loudly_unless_fallback_fresh(tmp_path, private_postgres,
                                                                                postgres_to_mariadb):
    job, table, replica = postgres_to_mariadb
    proc, data_dir = _start(tmp_path, job, "pglost")
    wait_for(replica.same, 240, message="the snapshot copied")
    _stop(proc)
    with private_postgres.connect() as conn:
        slots = [r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
                 if r[0].startswith("seatide_pglost")]
        assert len(slots) == 1, slots
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slots[0],))
    replica.apply(f"INSERT INTO {table} VALUES (500, 'lost?', 1)",
                  f"UPDATE {table} SET name = 'changed meanwhile' WHERE id = 7")
    _resume_fails_naming(data_dir, "pglost", slots[0])
    # The user's explicit "if the checkpoint cannot be used, start over": the pipeline starts over from
    # its startup.mode (a new snapshot, then changes on a new slot); the Jdbc sink's upserts by key
    # (APPEND_DATA) leave every source row there once, as a fresh start does
    proc = subprocess.Popen([*SEATIDE, "resume", "pglost", "--data-dir", data_dir, "--fallback", "fresh"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        wait_for(replica.same, 240, message="the new snapshot copied, 500 and 7's change with it")
        replica.apply(f"INSERT INTO {table} VALUES (501, 'after', 2)")
        wait_for(replica.same, 120, message="a change after the new snapshot streamed")
    finally:
        out, err = _stop(proc)
    assert "pipeline 1: starts over" in out + err and slots[0] in out + err, (out + err)[-3000:]
    rows = replica._read_target()
    assert len(rows) == 102 and (500, "lost?", 1.0) in rows and (7, "changed meanwhile", 3.5) in rows
    assert _job_row(data_dir, "pglost")["jobStatus"] == "CANCELED"


def test_resume_after_the_binlog_was_purged_fails_loudly(tmp_path, private_mariadb, mariadb_to_postgres):
    job, table, replica = mariadb_to_postgres
    proc, data_dir = _start(tmp_path, job, "mylost")
    wait_for(replica.same, 240, message="the snapshot copied")
    _stop(proc)
    replica.apply(f"INSERT INTO {table} VALUES (500, 'lost?', 1)")
    with private_mariadb.connect() as db, db.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        used = cur.fetchall()[-1][0]           # the file the checkpoint's position is in

        def purged() -> bool:
            # MariaDB keeps a file its binlog checkpoint still needs: rotate until it lets go
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
            cur.execute("SHOW BINARY LOGS")
            return used not in [row[0] for row in cur.fetchall()]

        wait_for(purged, 30, interval=0.5, message=f"{used} purged")
    _resume_fails_naming(data_dir, "mylost", used)


@sqlite_only
def test_a_cdc_job_cancelled_for_good_leaves_no_slot_behind(cluster: Cluster, private_postgres, postgres_to_mariadb):
    job, table, replica = postgres_to_mariadb

    def slots():
        with private_postgres.connect() as conn:
            return [r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
                    if r[0].startswith("seatide_gone")]

    def publications():
        with private_postgres.connect() as conn:
            return [r[0] for r in conn.execute("SELECT pubname FROM pg_publication").fetchall()
                    if r[0].startswith("seatide_gone")]

    cluster.cleanup_delay = 0.5
    cluster.coordinator("c1", extra=["--history-job-expire-minutes", "0.02"])
    cluster.worker("w1")
    cluster.submit(job, "gone")
    wait_for(replica.same, 240, message="the snapshot copied")
    assert slots() and publications()
    cluster.cancel("gone")
    cluster.wait_status("gone", "CANCELED", timeout=90)
    wait_for(lambda: not slots() and not publications(), 60, message="slot and publication dropped")
    # The release is the cleanup's first step; the history expires in a later one (after
    # --history-job-expire-minutes), so it is waited for, not assumed to have happened already.
    wait_for(lambda: "HISTORY_EXPIRED" in [e.kind for e in cluster.events("gone")], 60,
             message="the job's history expired")


def _check_endpoints(kind: str, request):
    """The source on a private server of ``kind``, the target on the machine's other database.
    Only that private server is asked for: each is a server's start (a private MariaDB's
    bootstrap is seconds of CPU) in a pytest process that may not need it otherwise."""
    from seatide.testing.cdc_check import mysql_endpoint, postgres_endpoint

    if kind == "postgres":
        server = request.getfixturevalue("private_postgres")
        return postgres_endpoint(server.port, "postgres"), mysql_endpoint(3306, "test")
    server = request.getfixturevalue("private_mariadb")
    return mysql_endpoint(server.port, "test"), postgres_endpoint(5432, "test")


def test_random_transactions_survive_driver_kills_without_upserts(tmp_path, request):
    """The randomized check with real processes (seatide.testing.cdc_job_check): seeded
    transactions with key changes, deletes, large values and edge numerics while the job's
    driver is SIGKILLed once mid-way; enable_upsert = false; the target ends equal to the source.
    One kill is the story (transactions before it, the restart, transactions after it); a
    resumed driver killed again is the soak set's (many kills, below), and so is a TRUNCATE's
    way out (a new job, a new snapshot).

    Seed 20 kills the driver after 11 of the 20 transactions and draws no TRUNCATE: the 9 after
    the kill reach the target through the restarted driver's replay from its checkpoint. Seed 11
    did neither: all 20 (a TRUNCATE among them) came before its kill, the restarted driver failed
    the job on the TRUNCATE, and the target was made equal by a second job's new snapshot, one
    `seatide run`, driver and snapshot more than the story needs, and no change after the kill."""
    from seatide.testing.cdc_job_check import run_job_check

    source, target = _check_endpoints("postgres", request)
    ran = run_job_check(source, target, upsert=False, seed=20, transactions=20, kills=1, workdir=str(tmp_path))
    assert ran["kills"] == 1 and ran["truncates"] == 0, ran


@pytest.mark.soak
@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "plain"])
@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_many_random_transactions_survive_many_driver_kills(tmp_path, request, kind, upsert):
    from seatide.testing.cdc_job_check import run_job_check

    source, target = _check_endpoints(kind, request)
    run_job_check(source, target, upsert=upsert, seed=3, transactions=150, kills=4, workdir=str(tmp_path),
                  deadline_s=600)
