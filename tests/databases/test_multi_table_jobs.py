"""Multi-table jobs as a user runs them (`seatide run` processes), killed with SIGKILL mid-way:
every target table ends equal to its source, each row once, every table resumed from the same
position (docs/design/multi-table.md). The CDC jobs are the SeaTunnel-shaped job files of
tests/databases/seatunnel_jobs, run unchanged but for hosts and names."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from collections import Counter

import pytest

from seatide.testing.driver_processes import driver_pids
from seatide.testing.cluster import batch_gate, wait_for
from tests.cli.test_local_run import ROOT, SEATIDE, seatide
from tests.databases.jobs import MARIADB_URL, PG_URL, mariadb_connect, pg_connect

pytestmark = pytest.mark.cluster

JOBS = os.path.join(os.path.dirname(__file__), "seatunnel_jobs")


def _run(tmp_path, job_file: str, job_id: str, variables: dict, env: dict | None = None):
    args = [*SEATIDE, "run", os.path.join(JOBS, job_file) if not os.path.isabs(job_file) else job_file,
            "--job-id", job_id, "--data-dir", str(tmp_path / "d")]
    for name, value in variables.items():
        args += ["-i", f"{name}={value}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, **(env or {})))


def _stop(proc, failed: bool = False) -> None:
    """Stop the job like Ctrl-C; when the test already failed, add what the job printed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if failed:
        raise AssertionError(f"the job printed:\n{out[-3000:]}\n{err[-3000:]}")
    assert proc.returncode == 130, err[-3000:]


def _kill_the_driver(job_id: str) -> None:
    first = driver_pids(job_id)
    assert len(first) == 1
    os.kill(first[0], signal.SIGKILL)
    wait_for(lambda: driver_pids(job_id) not in ([], first), 120, message="a new driver")


# -- a checkpointed copy of three tables without keys: a duplicate would stay ------------------------

# one micro-batch of table a, two of b, one of c (micro-batch.max-rows = 200): a batch is the
# unit of the kill and the resume, so more of them add only time (a second batch of table a,
# copied whole before the kill like the first, checked nothing the first does not)
ROWS = {"a": 200, "b": 400, "c": 200}


@pytest.fixture
def three_tables():
    suffix = secrets.token_hex(3)
    names = {k: f"mt_{k}_{suffix}" for k in ROWS}
    with pg_connect() as pg:
        pg.execute(f"CREATE TABLE {names['a']} (id bigint PRIMARY KEY, name text)")
        pg.execute(f"INSERT INTO {names['a']} SELECT g, 'a' || g FROM generate_series(0, {ROWS['a'] - 1}) g")
        pg.execute(f"CREATE TABLE {names['b']} (id int PRIMARY KEY, amount numeric(10, 2), day date)")
        pg.execute(f"INSERT INTO {names['b']} SELECT g, g * 0.5, date '2024-01-01' + g % 300 "
                   f"FROM generate_series(0, {ROWS['b'] - 1}) g")
        pg.execute(f"CREATE TABLE {names['c']} (id int PRIMARY KEY, flag boolean)")
        pg.execute(f"INSERT INTO {names['c']} SELECT g, g % 2 = 0 FROM generate_series(0, {ROWS['c'] - 1}) g")
    yield names
    with pg_connect() as pg:
        for name in names.values():
            pg.execute(f"DROP TABLE IF EXISTS {name}")
    with mariadb_connect() as db, db.cursor() as cur:
        for name in names.values():
            cur.execute(f"DROP TABLE IF EXISTS copy_{name}")


def _copy_job(names: dict) -> str:
    entries = ", ".join(f'{{ table_path = "public.{n}" }}' for n in names.values())
    return f"""
env {{
  job.mode = "BATCH"
  checkpoint.interval = 1000
  micro-batch.max-rows = 200
  job.retry.times = 3
  job.retry.interval.seconds = 1
}}
source {{
  Jdbc {{
    url = "{PG_URL}"
    user = "postgres"
    password = ""
    split.size = 100
    table_list = [{entries}]
  }}
}}
sink {{
  Jdbc {{
    url = "{MARIADB_URL}"
    user = "root"
    password = ""
    database = "test"
    tablePrefix = "copy_"
    primary_keys = []
  }}
}}
"""


def _target_ids(name: str) -> Counter:
    with mariadb_connect() as db, db.cursor() as cur:
        try:
            cur.execute(f"SELECT id FROM copy_{name}")
        except Exception:   # not created yet
            return Counter()
        return Counter(int(r[0]) for r in cur.fetchall())


def test_a_killed_multi_table_copy_resumes_every_table_and_writes_each_row_once(tmp_path, three_tables):
    conf = tmp_path / "copy.conf"
    conf.write_text(_copy_job(three_tables))
    proc = _run(tmp_path, str(conf), "mtcopy", {}, batch_gate(str(tmp_path / "gate"), passes=2))
    # held after two micro-batches: table a copied, table b part-way, table c not begun
    wait_for(lambda: sum(_target_ids(three_tables["a"]).values()) == ROWS["a"]
             and sum(_target_ids(three_tables["b"]).values()) > 0, 240, message="three batches committed")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    wait_for(lambda: driver_pids("mtcopy") == [], 15, message="the driver to die with seatide run")
    assert sum(_target_ids(three_tables["b"]).values()) < ROWS["b"]
    resumed = seatide("resume", "mtcopy", "--data-dir", str(tmp_path / "d"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for key, name in three_tables.items():
        ids = _target_ids(name)
        assert set(ids) == set(range(ROWS[key])) and max(ids.values()) == 1, (key, len(ids), max(ids.values()))


# -- SeaTunnel-shaped CDC jobs -----------------------------------------------------------------------

def _mysql_rows(connect, sql: str) -> list[tuple]:
    with connect() as db, db.cursor() as cur:
        cur.execute(sql)
        return sorted(tuple(str(v) for v in r) for r in cur.fetchall())


@pytest.fixture
def shop_and_audit(private_mariadb):
    shop, audit = f"shop_{secrets.token_hex(3)}", f"audit_{secrets.token_hex(3)}"
    private_mariadb.execute(
        f"CREATE DATABASE {shop}", f"CREATE DATABASE {audit}",
        f"CREATE TABLE {shop}.member (id INT PRIMARY KEY, name VARCHAR(40), joined DATE)",
        f"CREATE TABLE {shop}.purchase (id BIGINT PRIMARY KEY, member_id INT, total DECIMAL(10, 2))",
        f"CREATE TABLE {audit}.Ledger (entry INT PRIMARY KEY, note TEXT)",
        f"INSERT INTO {shop}.member SELECT seq, concat('m', seq), '2024-01-01' + INTERVAL seq DAY FROM seq_1_to_60",
        f"INSERT INTO {shop}.purchase SELECT seq, seq % 60, seq * 1.25 FROM seq_1_to_150",
        f"INSERT INTO {audit}.Ledger SELECT seq, repeat('n', seq % 50) FROM seq_1_to_30")
    yield private_mariadb, shop, audit
    private_mariadb.execute(f"DROP DATABASE {shop}", f"DROP DATABASE {audit}")
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {shop}_test")
        cur.execute(f"DROP DATABASE IF EXISTS {audit}_test")


def test_mysql_cdc_three_tables_into_database_test_tables_survive_a_driver_kill(tmp_path, shop_and_audit):
    server, shop, audit = shop_and_audit
    pairs = [(f"{shop}.member", f"{shop}_test.member_test", "id, name, joined"),
             (f"{shop}.purchase", f"{shop}_test.purchase_test", "id, member_id, total"),
             (f"{audit}.Ledger", f"{audit}_test.Ledger_test", "entry, note")]

    def same() -> bool:
        try:
            return all(_mysql_rows(server.connect, f"SELECT {cols} FROM {src}") ==
                       _mysql_rows(mariadb_connect, f"SELECT {cols} FROM {dst}") for src, dst, cols in pairs)
        except Exception:   # a target not created yet
            return False

    proc = _run(tmp_path, "mysql_cdc_three_tables_to_mysql.conf", "mt3cdc",
                {"cdc_port": server.port, "shop_db": shop, "audit_db": audit})
    try:
        wait_for(same, 240, message="the three snapshots copied")
        server.execute(f"INSERT INTO {shop}.member SELECT seq, 'new', NULL FROM seq_61_to_80",
                       f"UPDATE {shop}.purchase SET total = total + 1 WHERE id % 5 = 0",
                       f"DELETE FROM {audit}.Ledger WHERE entry > 25")
        wait_for(same, 120, message="the changes of the three tables applied")
        _kill_the_driver("mt3cdc")
        server.execute(f"DELETE FROM {shop}.member WHERE id < 10",
                       f"INSERT INTO {shop}.purchase SELECT seq, 1, 9.99 FROM seq_151_to_200",
                       f"UPDATE {audit}.Ledger SET note = 'edited' WHERE entry % 2 = 0")
        wait_for(same, 180, message="every target identical to its source after the restart")
    except Exception:
        _stop(proc, failed=True)
    _stop(proc)


@pytest.fixture
def pg_shop(private_postgres):
    shop, schema = f"shop_{secrets.token_hex(3)}", f"copies_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {shop}")
    with private_postgres.connect(shop) as conn:
        conn.execute("CREATE TABLE member (id int PRIMARY KEY, name text, joined date)")
        conn.execute("INSERT INTO member SELECT g, 'm' || g, date '2024-01-01' + g FROM generate_series(1, 60) g")
        conn.execute("CREATE TABLE purchase (id bigint PRIMARY KEY, member_id int, total numeric(10, 2))")
        conn.execute("INSERT INTO purchase SELECT g, g % 60, g * 1.25 FROM generate_series(1, 150) g")
    yield private_postgres, shop, schema
    private_postgres.drop_database(shop)
    with pg_connect() as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# In the soak set (CI time): CI kills the driver of a two-table Postgres-CDC job (one slot) in
# test_a_driver_killed_right_after_a_schema_change_applies_it_once_and_every_row_around_it below,
# and of a three-table MySQL-CDC job in test_mysql_cdc_three_tables_into_database_test_tables_survive_a_driver_kill.
@pytest.mark.soak
def test_postgres_cdc_two_tables_into_sink_prefixed_tables_survive_a_driver_kill(tmp_path, pg_shop):
    server, shop, schema = pg_shop
    pairs = [("member", "id, name, joined"), ("purchase", "id, member_id, total")]

    def rows(conn, sql):
        return sorted(tuple(r) for r in conn.execute(sql).fetchall())

    def same() -> bool:
        try:
            with server.connect(shop) as src, pg_connect() as dst:
                return all(rows(src, f"SELECT {cols} FROM {table}") ==
                           rows(dst, f"SELECT {cols} FROM {schema}.sink_{table}") for table, cols in pairs)
        except Exception:   # a target not created yet
            return False

    def change(*statements):
        with server.connect(shop) as conn:
            for statement in statements:
                conn.execute(statement)

    proc = _run(tmp_path, "postgres_cdc_two_tables_to_postgres.conf", "mt2pg",
                {"cdc_port": server.port, "shop_db": shop, "target_schema": schema})
    try:
        wait_for(same, 240, message="both snapshots copied")
        slots = server.connect().execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s",
                                         (shop,)).fetchone()[0]
        assert slots == 1                      # one slot for both tables
        change("INSERT INTO member SELECT g, 'new', NULL FROM generate_series(61, 80) g",
               "UPDATE purchase SET total = total + 1 WHERE id % 5 = 0", "DELETE FROM member WHERE id < 5")
        wait_for(same, 120, message="the changes of both tables applied")
        _kill_the_driver("mt2pg")
        change("DELETE FROM purchase WHERE id > 140", "UPDATE member SET name = 'edited' WHERE id % 2 = 0",
               "INSERT INTO purchase SELECT g, 2, 3.5 FROM generate_series(151, 190) g")
        wait_for(same, 180, message="both targets identical to their sources after the restart")
    except Exception:
        _stop(proc, failed=True)
    _stop(proc)


def _rows_or_none(sql: str) -> list | None:
    try:
        return _mysql_rows(mariadb_connect, sql)
    except Exception:   # not created yet
        return None


def test_a_driver_killed_right_after_a_schema_change_applies_it_once_and_every_row_around_it(tmp_path, pg_shop):
    """Two tables through one slot into MariaDB with schema.change.behavior = evolve: the driver is
    SIGKILLed right after the sink altered a target, before the new shape was kept; the next
    attempt finds the change applied and goes on: the rows before and after it land once."""
    server, shop, _schema = pg_shop
    prefix = f"evo{secrets.token_hex(2)}_"
    job = f"""
env {{ job.mode = "STREAMING", checkpoint.interval = 1000, job.retry.times = 3, job.retry.interval.seconds = 1 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:{server.port}/{shop}", username = "postgres", password = ""
    table-names = ["{shop}.public.member", "{shop}.public.purchase"]
    schema.change.behavior = "evolve"
  }}
}}
sink {{ Jdbc {{ url = "{MARIADB_URL}", user = "root", password = "", database = "test", tablePrefix = "{prefix}" }} }}
"""
    conf = tmp_path / "evolve.conf"
    conf.write_text(job)
    killed = tmp_path / "killed"
    proc = _run(tmp_path, str(conf), "mtevo", {}, {"SEATIDE_FAILPOINTS": f"driver.after_schema_change=once:kill:{killed}"})

    def same() -> bool:
        try:
            with server.connect(shop) as src:
                source = sorted(tuple(str(v) for v in r) for r in src.execute("SELECT id, name, level FROM member"))
            return source == _mysql_rows(mariadb_connect, f"SELECT id, name, level FROM {prefix}member") and \
                len(_mysql_rows(mariadb_connect, f"SELECT id FROM {prefix}purchase")) == 150
        except Exception:   # the column or the table not there yet
            return False

    try:
        wait_for(lambda: len(_rows_or_none(f"SELECT id FROM {prefix}member") or []) == 60, 240,
                 message="the snapshot copied")
        with server.connect(shop) as conn:
            conn.execute("INSERT INTO member VALUES (61, 'before', '2024-05-05')")
            conn.execute("ALTER TABLE member ADD COLUMN level int")
            conn.execute("UPDATE member SET level = id % 3 WHERE id > 50")
            conn.execute("INSERT INTO member VALUES (62, 'after', NULL, 9)")
        wait_for(same, 240, message="the change and the rows around it applied after the kill")
        assert killed.exists()
        ids = _mysql_rows(mariadb_connect, f"SELECT id FROM {prefix}member")
        assert len(ids) == len(set(ids)) == 62
        assert _mysql_rows(mariadb_connect, "SELECT column_name FROM information_schema.columns WHERE "
                           f"table_schema = 'test' AND table_name = '{prefix}member' AND column_name = 'level'") \
            == [("level",)]
    except Exception:
        _stop(proc, failed=True)
    _stop(proc)
    with mariadb_connect() as db, db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {prefix}member")
        cur.execute(f"DROP TABLE IF EXISTS {prefix}purchase")
