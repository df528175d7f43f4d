"""Opening the store, transactions, and the two fences every state write passes.

* ``leader_tx(epoch)`` — a coordinator write: in the same transaction it checks that the
  lease still carries this epoch and has not expired by the store's clock. A paused or
  partitioned old leader gets ``NotLeader`` and changes nothing.
* ``attempt_tx(job_id, attempt_id)`` — a driver write: it checks that the attempt is
  still the job's current, live attempt. A zombie driver gets ``AttemptFenced``.

On SQLite every write transaction is ``BEGIN IMMEDIATE`` (writers queue on the file
lock instead of failing on upgrade); on PostgreSQL the fence row is locked ``FOR UPDATE``
so the check and the write are one serial step against a new leader or attempt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from typing import Iterator

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Connection, Engine

from seatide import clock
from seatide.store import schema as s
from seatide.store.address import CONNECT_TIMEOUT_S, client_keepalives, OPEN_WAIT_S, default_store_url, normalize_url, redact  # noqa: F401  default_store_url: coordinator/ imports it here
from seatide.store.clock import read_store_now
from seatide.store.events import record_event  # noqa: F401  coordinator/ and restore.py import it here
from seatide.store.migrations import DEADLOCK_TRIES, OlderLeaseInUse, deadlocked, migrate
from seatide.store.sessions import again_on_new_session
from seatide.store.states import ATTEMPT_LIVE


class NotLeader(Exception):
    """The writer's lease epoch is no longer current."""


class AttemptFenced(Exception):
    """The writer's attempt is no longer the job's current attempt."""


class StoreUnavailable(Exception):
    """The store URL cannot be opened; the message says which and why."""


log = logging.getLogger(__name__)
# How long a statement waits for a lock before it fails (PostgreSQL ``lock_timeout``).
LOCK_TIMEOUT_S = 10.0


class Store:
    def __init__(self, url: str):
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        self.engine = self._open(self.url)

    def _open(self, url: str) -> Engine:
        if self.is_sqlite:
            path = url.split("///", 1)[1] if "///" in url else ""
            if path and path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            engine = create_engine(url, connect_args={"timeout": OPEN_WAIT_S, "check_same_thread": False})

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn, _record):
                dbapi_conn.isolation_level = None          # we issue BEGIN ourselves
                cur = dbapi_conn.cursor()
                cur.execute(f"PRAGMA busy_timeout={int(OPEN_WAIT_S * 1000)}")
                _use_wal(cur, url)
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()

            @event.listens_for(engine, "begin")
            def _on_begin(conn):
                mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
                conn.exec_driver_sql(f"BEGIN {mode}")

            return engine
        # A process paused inside a transaction (SIGSTOP, a long GC) must not hold the lease
        # row's lock forever: the server ends such a session and releases its locks.
        options = f"-c idle_in_transaction_session_timeout=5000 -c lock_timeout={int(LOCK_TIMEOUT_S * 1000)}"
        # A server that accepts and never answers (frozen, a black-holed address) must not hold
        # a process with no end and no message: a connection not made in CONNECT_TIMEOUT_S is an
        # error like a refused one, taken again wherever a step is taken again (store/sessions.py).
        return create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=8,
                             connect_args={"options": options, "connect_timeout": CONNECT_TIMEOUT_S,
                                           **client_keepalives(url)})

    # -- transactions ------------------------------------------------------------------
    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read whose statements all see one moment of the store. SQLite's read transaction
        does already (WAL); PostgreSQL's default, READ COMMITTED, gives each statement its own
        moment, so a leader reading jobs, then their attempts, then their pipelines could see
        a job whose attempt or pipelines changed in between."""
        with self.engine.connect() as conn:
            if not self.is_sqlite:
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if self.is_sqlite:
                conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def leader_tx(self, epoch: int) -> Iterator[Connection]:
        with self.write() as conn:
            # Only our own epoch's row is locked: a leader that wakes after another took over must
            # not lock the new leader's row (paused again before its rollback, it would hold up
            # the new leader's renewals and cost it the lease).
            query = select(s.leadership.c.epoch, s.leadership.c.expires_at).where(
                s.leadership.c.id == 1, s.leadership.c.epoch == epoch)
            if not self.is_sqlite:
                query = query.with_for_update()
            row = conn.execute(query).first()
            # The store's time once the row is ours (a lock wait may have passed since the query began).
            if row is None or row.epoch != epoch or row.expires_at < read_store_now(conn):
                raise NotLeader(f"epoch {epoch} is no longer the leader")
            yield conn

    @contextlib.contextmanager
    def attempt_tx(self, job_id: str, attempt_id: int, job_may_be_terminal: bool = False) -> Iterator[Connection]:
        with self.write() as conn:
            check_attempt_current(conn, job_id, attempt_id, lock=not self.is_sqlite,
                                  job_may_be_terminal=job_may_be_terminal)
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()


def _use_wal(cur, url: str) -> None:
    """Put the file in WAL mode (it stays so). While another process holds a fresh file's
    lock (creating the store, or switching it to WAL itself) the switch fails at once,
    without SQLite's busy wait: wait for that process, up to ``OPEN_WAIT_S``."""
    deadline, told = time.monotonic() + OPEN_WAIT_S, False
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            if not told:
                log.warning("the state store %s is locked by another process (creating it?): waiting for it, "
                            "up to %.0f s", redact(url), OPEN_WAIT_S)
                told = True
            time.sleep(0.05)


def check_attempt_current(conn: Connection, job_id: str, attempt_id: int, lock: bool = False,
                          job_may_be_terminal: bool = False) -> None:
    """Raise ``AttemptFenced`` unless the attempt is the job's current, live attempt.

    Reports about a job that has already ended (or been cleaned up) are late: they are
    refused too, so nothing can move a terminal job — except the attempt recording its
    own end (``job_may_be_terminal``).
    """
    from seatide.store.states import JOB_TERMINAL

    query = select(s.jobs.c.current_attempt, s.jobs.c.status).where(s.jobs.c.job_id == job_id)
    if lock:
        query = query.with_for_update()
    job = conn.execute(query).first()
    state = conn.execute(select(s.attempts.c.state).where(s.attempts.c.attempt_id == attempt_id)).scalar()
    if job is None or job.current_attempt != attempt_id or state not in ATTEMPT_LIVE:
        raise AttemptFenced(f"attempt {attempt_id} of job {job_id} is no longer current "
                            f"(current {job.current_attempt if job else 'none: job cleaned up'}, state {state})")
    if job.status in JOB_TERMINAL and not job_may_be_terminal:
        raise AttemptFenced(f"job {job_id} has already ended ({job.status}); late report from attempt "
                            f"{attempt_id} dropped")


def open_store(url: str, wait_for_server: bool = False) -> Store:
    """Open and migrate; a clear ``StoreUnavailable`` instead of a driver traceback.

    ``wait_for_server``: a server that refuses connections (down, restarting, failing over) is
    waited for, each try logged, up to ``OPEN_WAIT_S``: for the coordinator and the worker (a
    supervisor restarting them every second would hit its start limit, systemd's 5 in 10 s, and
    give up before a store coming back is there) and the driver (its attempt would be charged).
    Without it, for a CLI command, such a server fails the opening at once."""
    try:
        store = Store(url)
        # A server that is not there (a wrong port, a typo, a server down) fails a CLI command here, at once.
        if not wait_for_server:
            store.engine.connect().close()
        # An opener starved of CPU inside the migration's transaction for the idle limit (or a
        # restarted server) loses its session: transient, like any process's step
        # (store/sessions.py). The migration is one transaction, rolled back with the session,
        # and checks the revision again, so taking it again is safe.
        again_on_new_session(lambda: migrate(store), what=f"opening the state store {redact(url)}",
                             within=OPEN_WAIT_S)
    except StoreUnavailable:
        raise
    except OlderLeaseInUse as exc:
        raise StoreUnavailable(f"cannot open the state store {redact(url)}: {exc}") from None
    except Exception as exc:  # sqlalchemy/psycopg errors: say which store and why
        cause = getattr(exc, "orig", None) or exc
        reason = str(cause).strip().splitlines()[0]
        if _lock_wait_ended(cause):
            reason = (f"another process held it for over {OPEN_WAIT_S:.0f} s while creating or migrating it, "
                      f"or in a write that does not end ({reason}); start this one again once that process "
                      "is done, or stop it")
        elif deadlocked(exc):
            reason = (f"its migration met other transactions in a deadlock {DEADLOCK_TRIES} times ({reason}): a "
                      "process of an older SeaTide still running on it reads the tables the migration changes; stop "
                      "every process of the older version (docs/operations.md, Upgrading), then start this one again")
        elif "connection failed" in reason or "Connection refused" in reason:
            reason += "; is its server running, and is the address (--store) right?"
        raise StoreUnavailable(f"cannot open the state store {redact(url)}: {reason}") from None
    return store


def _lock_wait_ended(cause: BaseException) -> bool:
    """SQLite's busy wait, or PostgreSQL's lock_timeout (SQLSTATE 55P03), ran out."""
    return "database is locked" in str(cause) or getattr(cause, "sqlstate", None) == "55P03"
