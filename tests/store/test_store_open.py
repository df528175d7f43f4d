"""Opening a store that another process is creating or migrating waits for it, up to a
deadline, and never exits on the lock.

Four real processes (a coordinator, a worker and two CLI readers) start at once on a fresh
store while the test holds what a process creating it holds: on SQLite the write lock of a
file not yet in WAL mode (the moment a first opener switches it), on PostgreSQL the migration
lock, for longer than a statement may wait for a lock. Then the test lets go; all four must
come up on the store, migrated once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time

import pytest
from sqlalchemy import create_engine, select, text

from seatide.store import schema as s
from seatide.store.address import normalize_url
from seatide.store.db import open_store
from seatide.store.migrations import ADVISORY_KEY, current_revision, head
from seatide.testing.cluster import SEATIDE, free_port, http, wait_for

# PostgreSQL sessions wait this long for any lock before their statement fails
# (store/db.py); a migration may well take longer.
STATEMENT_LOCK_TIMEOUT_S = 10


def _start(args: list[str], log_path: str) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen([*SEATIDE, *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})


class Openers:
    """A coordinator, a worker and two `seatide list` started together on one store."""

    def __init__(self, url: str, tmp_path):
        self.url, self.dir = url, tmp_path / "data"
        self.dir.mkdir(exist_ok=True)
        self.port = free_port()
        common = ["--store", url, "--data-dir", str(self.dir)]
        self.logs = {name: str(tmp_path / f"{name}.log") for name in ("coordinator", "worker", "list1", "list2")}
        self.procs = {
            "coordinator": _start(["cluster", "coordinator", "--port", str(self.port), "--node-id", "c1",
                                   "--no-plan-warm-up", *common], self.logs["coordinator"]),
            "worker": _start(["cluster", "worker", "--node-id", "w1", "--slots", "1", "--warm-drivers", "0", *common],
                             self.logs["worker"]),
            "list1": _start(["list", *common], self.logs["list1"]),
            "list2": _start(["list", *common], self.logs["list2"]),
        }

    def output(self) -> str:
        return "\n".join(f"===== {name}\n{open(path, errors='replace').read()[-3000:]}"
                         for name, path in self.logs.items())

    def none_exited(self) -> None:
        exited = {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}
        assert not exited, f"exited while the store was being created: {exited}\n{self.output()}"

    def all_up(self) -> None:
        for name in ("list1", "list2"):
            assert self.procs[name].wait(timeout=120) == 0, self.output()
        url = f"http://127.0.0.1:{self.port}/api/v1/overview"
        wait_for(lambda: http("GET", url)[0] == 200, 120, message="the coordinator serving")
        store = open_store(self.url)
        try:
            wait_for(lambda: self._registered(store, "w1"), 120, message="the worker registered")
            with store.read() as conn:
                assert current_revision(conn) == head()
                assert len(conn.execute(select(s.events).where(s.events.c.kind == "SCHEMA_UPGRADED")).all()) == 1
        finally:
            store.dispose()

    @staticmethod
    def _registered(store, node_id: str) -> bool:
        with store.read() as conn:
            return conn.execute(select(s.nodes).where(s.nodes.c.node_id == node_id)).first() is not None

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def _log_says(path: str, words: str) -> bool:
    with open(path, errors="replace") as handle:
        return words in handle.read()


@pytest.mark.cluster
def test_processes_starting_on_a_fresh_sqlite_store_wait_while_it_is_being_created(tmp_path):
    path = tmp_path / "data" / "state.db"
    path.parent.mkdir()
    creator = sqlite3.connect(str(path), isolation_level=None)
    creator.execute("BEGIN IMMEDIATE")          # as the first opener holds it while it switches to WAL
    openers = None
    try:
        openers = Openers(f"sqlite:///{path}", tmp_path)
        wait_for(lambda: all(_log_says(log, "waiting") for log in openers.logs.values())
                 or any(p.poll() is not None for p in openers.procs.values()), 120,
                 message="all four waiting for the store")
        openers.none_exited()
        creator.execute("ROLLBACK")
        creator.close()
        openers.all_up()
    finally:
        creator.close()
        if openers is not None:
            openers.stop()


@pytest.mark.cluster
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_processes_starting_on_a_fresh_postgres_store_wait_for_a_long_migration(store_url, tmp_path):
    engine = create_engine(normalize_url(store_url))
    migrating = engine.connect()
    migrating.begin()
    migrating.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_KEY})
    openers = None
    try:
        openers = Openers(store_url, tmp_path)
        # Held until all four have waited for it longer than a statement may wait for a lock.
        wait_for(lambda: _waiting_for_migration(engine, STATEMENT_LOCK_TIMEOUT_S + 2) == 4
                 or any(p.poll() is not None for p in openers.procs.values()), 180,
                 message="all four waiting for the migration")
        openers.none_exited()
        migrating.rollback()
        openers.all_up()
    finally:
        migrating.close()
        if openers is not None:
            openers.stop()
        engine.dispose()


def _waiting_for_migration(engine, longer_than: float) -> int:
    """Sessions waiting for the migration lock for more than ``longer_than`` seconds."""
    with engine.connect() as conn:
        return conn.execute(text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = :key"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND waitstart < clock_timestamp() - make_interval(secs => :s)"),
            {"key": ADVISORY_KEY, "s": longer_than}).scalar()


def test_a_store_held_past_the_deadline_fails_with_a_clear_message(store_url, tmp_path, monkeypatch):
    from seatide.store import db, migrations

    # The deadline is read where each wait is taken: SQLite's busy wait and WAL switch (db),
    # PostgreSQL's wait for the migration lock (migrations). Unset there, it waited 60 s.
    monkeypatch.setattr(db, "OPEN_WAIT_S", 1.0)
    monkeypatch.setattr(migrations, "OPEN_WAIT_S", 1.0)
    if store_url.startswith("sqlite"):
        holder = sqlite3.connect(store_url.split("///", 1)[1], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        holder = create_engine(normalize_url(store_url)).connect()
        holder.begin()
        holder.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_KEY})
    try:
        started = time.monotonic()
        with pytest.raises(db.StoreUnavailable) as raised:
            open_store(store_url)
        waited = time.monotonic() - started
        assert 1.0 <= waited < 30.0, waited               # it waited, for the deadline, before giving up
        message = str(raised.value)
        assert "another process held it for over 1 s while creating or migrating it" in message, message
        assert "start this one again" in message
    finally:
        holder.close()
