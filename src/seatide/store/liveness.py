"""Liveness locks: a lock a process holds for its whole life, so that its death is seen at once.

The leader holds ``leadership``; each worker holds ``worker-<node id>``. When a process dies,
its operating system closes its files and sockets, and with them its locks:

* SQLite: ``flock`` on a file in ``<db>.locks/`` beside the database, on an fd open for
  the process's life (never inherited by drivers: Python opens fds non-inheritable).
* PostgreSQL: a session-level advisory lock, on a connection of its own kept open for
  the process's life (never pooled, never in a transaction, so no pool recycling and no
  ``idle_in_transaction_session_timeout`` ends it).

A free lock therefore means "its holder is gone" — at once, not after a timeout. A
*paused* or *partitioned* process still holds its lock: the lease and the heartbeats
stay the backstop for those (``coordinator/lease.py``, ``coordinator/reconcile.py``).

On PostgreSQL a lock is also freed when the server ends the session of a live process
(a server restart, ``pg_terminate_backend``, TCP keepalives failing). The holder checks
its own lock every tick and acts as if it had died (the leader steps down, a worker kills
its drivers); and the lock session's keepalives are set so the server never gives up on
a silent peer before its heartbeat would have timed out anyway (``timeouts.py``).

Nothing here decides anything: the lease and the reconcile loop read these locks.
``liveness_for`` builds the one a process uses; ``SEATIDE_LIVENESS_LOCKS=0`` turns them off
(lease and heartbeats only, as before: the benchmark's baseline).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import threading
import zlib
from typing import Iterable, Protocol

from seatide import clock
from seatide.store.address import client_keepalives
from seatide.timeouts import Timeouts

log = logging.getLogger(__name__)

LIVENESS_ENV = "SEATIDE_LIVENESS_LOCKS"
# Named after the lease's table (store revision 0022), not ``leader`` as before: a coordinator of an older SeaTide
# still running tries the old name, and one whose election fails on the table it no longer finds keeps that lock
# for good (its tick does not release it). Under the old name it stands in no leader's way; under this one it would
# leave every leader of this version unlocked (``liveness`` false), taken over at its lease's expiry only. On
# PostgreSQL the advisory key is a hash of the name, on SQLite the name is the file's.
LEADER = "leadership"
# The first half of every SeaTide advisory lock key: other users of advisory locks in the
# same database pick their own (the second half is a hash of the lock's name).
ADVISORY_CLASS = 0x5EA7


def worker_lock(node_id: str) -> str:
    return f"worker-{node_id}"


class Liveness(Protocol):
    can_lose_held: bool     # whether a live holder can lose a lock it holds (and must watch it)

    def hold(self, name: str) -> bool:
        """Take the lock without waiting and keep it; True if this process holds it now."""

    def holds(self, name: str) -> bool:
        """Whether this process still holds it (False once the PostgreSQL session is gone)."""

    def release(self, name: str) -> None:
        ...

    def free_among(self, names: Iterable[str]) -> tuple[set[str], float]:
        """Which of these locks nobody holds now (their holders have died), and the store's time
        read after they were: a free streak is counted from no earlier than a moment the lock was
        seen free, so never from before its holder last saw it held (worker/lock_regain.py)."""

    def close(self) -> None:
        ...


def liveness_for(store, timeouts: Timeouts) -> Liveness | None:
    """The liveness locks for this store, or None when ``SEATIDE_LIVENESS_LOCKS=0``."""
    if os.environ.get(LIVENESS_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        log.info("liveness locks off (%s=0): deaths are seen by lease and heartbeat timeouts only", LIVENESS_ENV)
        return None
    if store.is_sqlite:
        path = store.url.split("///", 1)[1] if "///" in store.url else ""
        if not path or path == ":memory:":
            return None          # an in-memory store has one process: nobody to watch
        return FileLocks(os.path.abspath(path) + ".locks")
    return AdvisoryLocks(store.url, timeouts)


class FileLocks:
    """``flock`` on one file per lock in ``directory``."""

    can_lose_held = False       # only our own release, or our death, drops a flock

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._fds: dict[str, int] = {}
        self._mutex = threading.Lock()      # local mode: a coordinator and a worker thread share one

    def path(self, name: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
        if safe != name:        # two names must never share a file
            safe += f"-{zlib.crc32(name.encode()):08x}"
        return os.path.join(self.directory, safe)

    def hold(self, name: str) -> bool:
        with self._mutex:
            if name in self._fds:
                return True
            fd = os.open(self.path(name), os.O_RDWR | os.O_CREAT, 0o644)
            if not _flock(fd, fcntl.LOCK_EX):
                os.close(fd)
                return False
            self._fds[name] = fd
            return True

    def holds(self, name: str) -> bool:
        return name in self._fds     # an open fd keeps its flock: only our own release drops it

    def release(self, name: str) -> None:
        with self._mutex:
            fd = self._fds.pop(name, None)
            if fd is not None:
                os.close(fd)          # closing the only fd of the open file releases the flock

    def free_among(self, names: Iterable[str]) -> tuple[set[str], float]:
        free = set()
        for name in names:
            if name in self._fds:
                continue
            try:
                fd = os.open(self.path(name), os.O_RDONLY)
            except FileNotFoundError:
                free.add(name)        # never held (or removed): nobody holds it
                continue
            try:
                # A shared probe: it fails while the holder keeps its exclusive lock, and if it
                # succeeds it is dropped at once (a holder starting up just then retries).
                if _flock(fd, fcntl.LOCK_SH):
                    free.add(name)
            finally:
                os.close(fd)
        return free, clock.store_now()

    def close(self) -> None:
        for name in list(self._fds):
            self.release(name)


def _flock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise


class AdvisoryLocks:
    """Session-level advisory locks on one dedicated PostgreSQL connection."""

    can_lose_held = True        # the server may end the session: a restart, a failover, a terminate

    def __init__(self, url: str, timeouts: Timeouts):
        self.url = "postgresql://" + url.split("://", 1)[1]
        idle, interval, count = timeouts.liveness_keepalives
        # The lock lives exactly as long as this session: no server-side timeout may end an
        # idle one, and the server gives up on a silent peer only after its heartbeat would
        # have timed out anyway (see Timeouts.liveness_keepalives).
        self.options = (f"-c idle_session_timeout=0 -c idle_in_transaction_session_timeout=0 "
                        f"-c statement_timeout=5000 -c tcp_keepalives_idle={idle} "
                        f"-c tcp_keepalives_interval={interval} -c tcp_keepalives_count={count}")
        self._conn = None
        self._session: tuple | None = None     # (pid, backend_start) of our last session
        self._lost: set[int] = set()           # keys it held when we gave it up (its end is ours to make)
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    @staticmethod
    def key(name: str) -> tuple[int, int]:
        return ADVISORY_CLASS, zlib.crc32(name.encode()) & 0x7FFFFFFF

    def _connection(self):
        import psycopg

        if self._conn is None or self._conn.closed:
            self._forget_session()
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5, options=self.options,
                                   **client_keepalives(self.url))
            if self._session is not None and self._lost:
                self._end_old_session(conn)
            self._session = conn.execute("SELECT pid, backend_start FROM pg_stat_activity "
                                         "WHERE pid = pg_backend_pid()").fetchone()
            self._conn = conn
        return self._conn

    def _end_old_session(self, conn) -> None:
        """Our last session may live on at the server after its connection broke on our side
        alone (a failover's black hole, a check given up by ``tcp_user_timeout``), holding our
        locks until the server's keepalives give up on it, minutes later: end it, so that the
        lock can be taken again at once (waiting up to a second for it to exit, PostgreSQL 14 and
        later). Its pid and start time name it, and it must still hold one of the locks we held
        there: a backend a pooling proxy has since given another client is never touched."""
        wait = ", 1000" if conn.info.server_version >= 140000 else ""
        keys, self._lost = sorted(self._lost), set()
        try:
            conn.execute(f"SELECT pg_terminate_backend(a.pid{wait}) FROM pg_stat_activity a WHERE a.pid = %s AND "
                         "a.pid <> pg_backend_pid() AND a.backend_start = %s AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND "
                         "l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s AND l.objsubid = 2 "
                         "AND l.objid::bigint = ANY(%s))", (*self._session, ADVISORY_CLASS, keys))
        except Exception as exc:      # not allowed (another role's): the server's keepalives end it
            log.warning("liveness locks: cannot end our earlier session (pid %s): %s", self._session[0], exc)

    def _query(self, sql: str, params=()):
        try:
            return self._connection().execute(sql, params).fetchall()
        except Exception:
            self._drop_connection()
            raise

    def _forget_session(self) -> None:
        """A new session holds nothing: what this one held is gone, or is ended by the next one."""
        self._lost |= {self.key(name)[1] for name in self._held}
        self._held.clear()
        self._conn = None

    def _drop_connection(self) -> None:
        conn = self._conn
        self._forget_session()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def hold(self, name: str) -> bool:
        with self._mutex:
            if name in self._held:
                return True
            if self._query("SELECT pg_try_advisory_lock(%s, %s)", self.key(name))[0][0]:
                self._held.add(name)
            return name in self._held

    def holds(self, name: str) -> bool:
        """Whether our session, which took the lock, still lives: a session-level lock goes only
        with its session or our own release, so a round trip on it is the proof (not a read of
        ``pg_locks``, which takes every lock-manager partition's lock, four times a second per worker)."""
        with self._mutex:
            if name not in self._held:
                return False
            try:
                [(pid,)] = self._query("SELECT pg_backend_pid()")
            except Exception as exc:
                log.warning("liveness lock %s: its session is gone (%s)", name, exc)
                return False
            if pid != self._session[0]:      # not the backend that took it (a proxy that re-bound us)
                log.warning("liveness lock %s: our session was moved to another backend", name)
                self._drop_connection()
            return name in self._held

    def release(self, name: str) -> None:
        with self._mutex:
            if name not in self._held:
                return
            self._held.discard(name)
            try:
                self._query("SELECT pg_advisory_unlock(%s, %s)", self.key(name))
            except Exception as exc:    # the session is closed then, which releases it too
                log.warning("liveness lock %s: release failed (%s); its session was closed", name, exc)

    def free_among(self, names: Iterable[str]) -> tuple[set[str], float]:
        names = [n for n in names if n not in self._held]
        if not names:
            return set(), 0.0       # nothing free: no time to count from
        keys = {self.key(n)[1]: n for n in names}
        with self._mutex:
            # Read pg_locks rather than try the locks: a probe never stands in a holder's way. The
            # time is read on the aggregate's output, so after pg_locks was.
            [(seen_at, held)] = self._query(
                "SELECT extract(epoch FROM clock_timestamp())::float8, objids FROM (SELECT "
                "coalesce(array_agg(objid::bigint), '{}') AS objids FROM pg_locks WHERE locktype = 'advisory' "
                "AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid::bigint = %s AND objsubid = 2 AND objid::bigint = ANY(%s)) AS probe",
                (ADVISORY_CLASS, list(keys)))
        held = {int(objid) for objid in held}
        return {name for objid, name in keys.items() if objid not in held}, seen_at

    def close(self) -> None:
        with self._mutex:
            self._drop_connection()
