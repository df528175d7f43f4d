"""Schema migrations with Alembic: a store made before Alembic is adopted and upgraded with a
running job in it, on SQLite and PostgreSQL; two processes opening a fresh store migrate it once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, insert, select, text, update

from seatide.coordinator.service import Coordinator, register_node
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.address import normalize_url
from seatide.store.db import StoreUnavailable, open_store
from seatide.store.jobs import request_stop
from seatide.store.migrations import ADVISORY_KEY, ALEMBIC_MANAGED, current_revision, head
from seatide.store.checkpoint_views import checkpoint_report
from seatide.testing.cluster import wait_for
from tests.conftest import PG_ADMIN
from tests.store import legacy_v2 as v2

JOB_ID = "se-upgrade"
CONFIG = """
env { job.mode = STREAMING, checkpoint.interval = 1000 }
source { FakeSource { plugin_output = "a", row.num = 10, schema = { fields { id = bigint } } } }
source { FakeSource { plugin_output = "b", row.num = 10, schema = { fields { id = bigint } } } }
sink { Console { plugin_input = "a" } }
sink { Console { plugin_input = "b" } }
"""


def record_running_job(url: str, data_dir: str) -> int:
    """A STREAMING job as version 2 left it mid-run: submitted, scheduled on worker w1, its
    attempt RUNNING, two pipelines with three committed batches each, and its events."""
    from sqlalchemy import create_engine

    engine = create_engine(normalize_url(url))
    now = time.time()
    with engine.begin() as conn:
        conn.execute(insert(v2.nodes).values(node_id="w1", role="worker", host="elsewhere", pid=1, slots=2,
                                             started_at=now, heartbeat_at=now, stopped=False))
        conn.execute(insert(v2.jobs).values(
            job_id=JOB_ID, incarnation=1, name="upgrade", config=CONFIG, variables="{}", mode="STREAMING",
            desired="RUN", status="RUNNING", retries_used=0, max_retries=3, retry_interval_s=3.0,
            checkpoint_interval_ms=1000, stale_after_s=3600.0, on_stale="restart", cleanup_delay_s=60.0,
            created_at=now, updated_at=now))
        attempt = conn.execute(insert(v2.attempts).values(
            job_id=JOB_ID, incarnation=1, number=1, worker_id="w1", state="RUNNING", pid=4242, created_at=now,
            launched_at=now, heartbeat_at=now, kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(v2.jobs).values(current_attempt=attempt))
        checkpoint_id = 0
        for pipeline in (1, 2):
            conn.execute(insert(v2.pipelines).values(
                job_id=JOB_ID, incarnation=1, pipeline_id=pipeline, status="RUNNING", fingerprint=f"f{pipeline}",
                checkpoint_dir=os.path.join(data_dir, "checkpoints", JOB_ID, str(pipeline)), started_at=now,
                rows_read=30, rows_written=30, last_batch_id=2, read_batch_id=2, idle=False, restores=0))
            for batch in range(3):
                checkpoint_id += 1
                conn.execute(insert(v2.checkpoints).values(
                    job_id=JOB_ID, incarnation=1, checkpoint_id=checkpoint_id, pipeline_id=pipeline,
                    batch_id=batch, kind="CHECKPOINT", status="COMPLETED", created_at=now, duration_ms=5, rows=10,
                    source_offsets=json.dumps({"a": batch}), fingerprint=f"f{pipeline}", attempt_id=attempt))
        for kind in ("JOB_SUBMITTED", "ATTEMPT_CREATED", "PIPELINE_RUNNING"):
            conn.execute(insert(v2.events).values(at=now, job_id=JOB_ID, incarnation=1, kind=kind, detail="{}",
                                                  epoch=1, actor="test"))
    engine.dispose()
    return attempt


def test_a_store_made_before_alembic_is_adopted_with_its_running_job_intact(store_url, tmp_path):
    v2.build_v2_store(normalize_url(store_url))
    attempt = record_running_job(store_url, str(tmp_path))

    store = open_store(store_url)
    with store.read() as conn:
        assert current_revision(conn) == head()
        # the upgraded schema is the one a fresh store gets from schema.py, column for column
        assert compare_metadata(MigrationContext.configure(conn), s.metadata) == []
        assert [r.version for r in conn.execute(select(s.schema_version).order_by(s.schema_version.c.version))] \
            == [1, 2, ALEMBIC_MANAGED]
        upgraded = conn.execute(select(s.events).where(s.events.c.kind == "SCHEMA_UPGRADED")).one()
        assert json.loads(upgraded.detail) == {"origin": "schema_version 2", "revision": head()}
        job = conn.execute(select(s.jobs)).one()
        assert (job.status, job.desired, job.current_attempt, job.checkpoints_retained) == \
            ("RUNNING", "RUN", attempt, None)
        assert [(p.pipeline_id, p.last_batch_id, p.pruned_completed) for p in
                conn.execute(select(s.pipelines).order_by(s.pipelines.c.pipeline_id))] == [(1, 2, 0), (2, 2, 0)]
        report = checkpoint_report(conn, JOB_ID)
    assert (report["completed"], report["lastCheckpointId"]) == (6, 6)
    # the newest checkpoint's duration and rows, copied to its pipeline row by revision 0010
    assert (report["lastCheckpointDurationMs"], report["lastCheckpointRows"]) == (5, 10)

    # The old job goes on: its driver commits, the user cancels, the leader reconciles it to the end.
    driver = AttemptReporter(store, JOB_ID, 1, attempt)
    driver.heartbeat()
    assert driver.batch_committed(1, 3, 10, 5, {"a": 3}, "f1") == 7
    assert request_stop(store, JOB_ID) == "RUNNING"
    register_node(store, "w1", "worker", slots=2)
    leader = Coordinator(store, node_id="c-upgrade")
    assert leader.lease.tick()
    leader.reconcile_all()
    assert _status(store) == "CANCELING"
    for pipeline in (1, 2):
        driver.pipeline_status(pipeline, "CANCELED")
    driver.end_attempt(True)
    leader.reconcile_all()
    assert _status(store) == "CANCELED"
    with store.read() as conn:
        assert conn.execute(select(s.job_results.c.cleanup).where(s.job_results.c.job_id == JOB_ID)).scalar() \
            == "DIRTY"
        kinds = [e.kind for e in conn.execute(select(s.events).where(s.events.c.job_id == JOB_ID)
                                              .order_by(s.events.c.seq))]
    assert kinds[:3] == ["JOB_SUBMITTED", "ATTEMPT_CREATED", "PIPELINE_RUNNING"]
    assert "PIPELINE_CANCELED" in kinds
    store.dispose()


def _status(store) -> str:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == JOB_ID)).scalar()


OPEN = "from seatide.store.db import open_store; open_store({url!r}).dispose(); print('opened')"


def test_two_processes_opening_a_fresh_store_at_once_migrate_it_once(store_url, tmp_path):
    gate = tmp_path / "gate"
    procs = []
    for name in ("a", "b"):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
               # Each says when it is about to take the migration lock; whoever holds it waits at the gate.
               "SEATIDE_FAILPOINTS": f"store.before_migration_lock=once:sleep:0:{tmp_path / name},"
                                     f"store.migrate=gate:0:{gate}"}
        procs.append(subprocess.Popen([sys.executable, "-c", OPEN.format(url=store_url)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        wait_for(lambda: (tmp_path / "a").exists() and (tmp_path / "b").exists(), 60,
                 message="both openers started")
        wait_for(lambda: _migration_lock_held(store_url), 30, message="one opener holds the migration lock")
        assert all(p.poll() is None for p in procs), "neither may finish while the other holds the lock"
        gate.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0 and out.strip() == "opened", err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    store = open_store(store_url)
    with store.read() as conn:
        assert current_revision(conn) == head()
        assert len(conn.execute(select(s.events).where(s.events.c.kind == "SCHEMA_UPGRADED")).all()) == 1
        assert len(conn.execute(select(s.leadership)).all()) == 1
    store.dispose()


def test_an_opening_whose_session_the_server_ends_mid_migration_opens_on_a_new_one(tmp_path):
    """Seen in a loaded run: an opener starved of CPU inside its migration's transaction for
    the 5 s idle limit lost its session and failed with "cannot open the state store". A
    session the server ends is transient (store/sessions.py); a migration is one transaction,
    rolled back with the session, and checks the revision again: it is simply taken again."""
    name = f"seatide_{os.urandom(4).hex()}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    gate = tmp_path / "gate"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "SEATIDE_FAILPOINTS": f"store.migrate=gate:0:{gate}"}    # held inside its transaction
    proc = subprocess.Popen([sys.executable, "-c", OPEN.format(url=url)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _migration_lock_held(url), 60, message="the opener holds the migration lock")
        with admin.connect() as conn:      # the server ends its session (as its idle limit would)
            ended = conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                      "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": name}).scalar()
        assert ended >= 1
        gate.touch()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "opened", err
        assert "taken again on a new session" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
    store = open_store(url)
    with store.read() as conn:
        assert current_revision(conn) == head()
        assert len(conn.execute(select(s.events).where(s.events.c.kind == "SCHEMA_UPGRADED")).all()) == 1
    store.dispose()
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def test_a_store_whose_server_refuses_connections_is_refused_at_once(caplog):
    """A server not there (a wrong port, a typo in --store, a server down) is not a session it
    ended: nothing is taken again on a new session, for 60 s, before the clear error (a CLI
    command waited that long; a coordinator or worker ends and its supervisor restarts it)."""
    import socket

    with socket.socket() as probe:             # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://postgres@127.0.0.1:{port}/test"
    with caplog.at_level("WARNING"), pytest.raises(StoreUnavailable, match="cannot open the state store") as refused:
        open_store(url)
    assert "is its server running, and is the address (--store) right?" in str(refused.value)
    assert not [r for r in caplog.records if "taken again" in r.getMessage()], caplog.text


def test_a_server_that_accepts_and_never_answers_fails_the_opening(monkeypatch):
    """A frozen server, or an address where something listens and never speaks: the connection is
    given up after the store's connect timeout, as a refused one (outside review: the CLI, the
    coordinator and the worker waited with no end and no message, so no supervisor restarted them).
    The timeout is 2 s here, libpq's least: its length is not the subject, that it ends is (10 s of
    the fast tier at the shipped one)."""
    import socket
    import threading

    from seatide.store import db

    monkeypatch.setattr(db, "CONNECT_TIMEOUT_S", 2)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    url = f"postgresql://postgres@127.0.0.1:{listener.getsockname()[1]}/test"
    outcome: list = []

    def opening():
        try:
            open_store(url)
            outcome.append("opened")
        except StoreUnavailable as exc:
            outcome.append(str(exc))
    thread = threading.Thread(target=opening, daemon=True)
    try:
        thread.start()
        thread.join(60)
        assert outcome, "the opening still waits on a server that never answers"
        assert "cannot open the state store" in outcome[0] and "timeout" in outcome[0], outcome
    finally:
        listener.close()


def test_a_drivers_opening_waits_for_its_stores_server_to_come_back(tmp_path, caplog):
    """A driver is launched by a worker that has just read the store: a refused connection then is
    the store's restart, and failing the attempt for it would charge the job a retry. Its opening
    (``wait_for_server``, as the coordinator's and the worker's) takes it again until the server is back."""
    import threading

    from seatide.testing.servers import PrivatePostgres

    server = PrivatePostgres().start()
    try:
        server.stop_server()
        opened: list = []
        opener = threading.Thread(target=lambda: opened.append(open_store(
            f"postgresql://postgres@127.0.0.1:{server.port}/postgres", wait_for_server=True)))
        with pytest.raises(StoreUnavailable):      # what any other process does: it fails at once
            open_store(f"postgresql://postgres@127.0.0.1:{server.port}/postgres")
        caplog.clear()
        with caplog.at_level("WARNING"):
            opener.start()
            wait_for(lambda: any("taken again" in r.getMessage() for r in caplog.records), 60,
                     message="the driver's opening to try again while the server is down")
            server.start_server()
        opener.join(timeout=120)
        assert opened, "the driver's opening gave up while the server came back"
        with opened[0].read() as conn:
            assert current_revision(conn) == head()
        opened[0].dispose()
    finally:
        server.stop()


def _migration_lock_held(url: str) -> bool:
    """Someone holds the lock migrations take: the advisory lock, or SQLite's write lock."""
    import sqlite3
    from sqlalchemy import create_engine

    if url.startswith("sqlite"):
        path = url.split("///", 1)[1]
        if not os.path.exists(path):
            return False
        conn = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:        # database is locked
            return True
        finally:
            conn.close()
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = :key"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
                {"key": ADVISORY_KEY}).scalar() > 0
    finally:
        engine.dispose()


def test_a_store_from_a_newer_seatide_is_refused_with_a_clear_message(store_url):
    open_store(store_url).dispose()
    store = open_store(store_url)
    with store.write() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.dispose()
    with pytest.raises(StoreUnavailable, match="schema revision 9999, newer than this SeaTide.*upgrade SeaTide"):
        open_store(store_url)


def test_the_packaged_head_is_the_newest_revision_alembic_finds():
    from alembic.script import ScriptDirectory

    from seatide.store.migrations import HEAD, _config

    assert ScriptDirectory.from_config(_config()).get_current_head() == HEAD


def test_a_new_store_is_stamped_as_alembic_would_and_matches_the_revisions(store_url):
    """Built from schema.py and stamped by hand (no Alembic import): Alembic reads the same
    revision, and the tables are what the revisions make (the adoption test builds those)."""
    store = open_store(store_url)
    try:
        with store.read() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == head()
            assert compare_metadata(MigrationContext.configure(conn), s.metadata) == []
    finally:
        store.dispose()


OPENS_WITHOUT_ALEMBIC = ("import sys; from seatide.store.db import open_store; open_store({url!r}).dispose(); "
                         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))")


def test_opening_a_new_or_current_store_does_not_import_alembic(store_url):
    """Every SeaTide process opens the store as it starts: the import was 0.2 s of CPU of each."""
    for _ in ("new", "current"):
        done = subprocess.run([sys.executable, "-c", OPENS_WITHOUT_ALEMBIC.format(url=store_url)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().splitlines()[-1] == "[]"
