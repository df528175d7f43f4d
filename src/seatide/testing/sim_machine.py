"""The simulated machine under the real control-plane code: a store each process can be cut off
from, the liveness locks of the simulated world, and a process table of simulated pids.

Apart from ``processes.py`` (the simulated driver) because these stand in for the operating
system and the store's server, which every simulated process shares: the world, the fleet and
the worker's own tests use them without a driver.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from seatide import clock
from seatide.store.db import Store

# Simulated pids lie above Linux's pid_max: no real process can ever be mistaken for one.
FIRST_PID = 5_000_000


class StorePartitioned(ConnectionError):
    """The simulated process is cut off from the store."""


class ProcessStore(Store):
    """One process's connection to the shared store; every call raises while it is partitioned."""

    def __init__(self, shared: Store):       # shares the engine: one SQLite file, one pool
        self.url, self.is_sqlite, self.engine = shared.url, shared.is_sqlite, shared.engine
        self.partitioned = False

    def _reach(self) -> None:
        if self.partitioned:
            raise StorePartitioned("store unreachable (simulated partition)")

    @contextlib.contextmanager
    def read(self) -> Iterator:
        self._reach()
        with super().read() as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator:
        self._reach()
        with super().write() as conn:
            yield conn


class SimLocks:
    """The liveness locks of the simulated world (``store/liveness.py``): lock name -> the
    process holding it. A crash frees its locks at once, as the OS closes a dead process's
    files; a pause or a cut-off store does not (a flock stays held), so those are still
    left to the lease and heartbeat timeouts. A restart of the store's server frees every
    lock while every holder lives (PostgreSQL's sessions all end): ``restart_store``."""

    def __init__(self):
        self.owners: dict[str, str] = {}

    def view(self, process: str, store: ProcessStore | None = None) -> "SimLiveness":
        return SimLiveness(self, process, store)

    def crash(self, process: str) -> None:
        for name in [n for n, owner in self.owners.items() if owner == process]:
            del self.owners[name]

    def restart_store(self) -> None:
        self.owners.clear()


class SimLiveness:
    """One process's handle on ``SimLocks``, answering as ``store.liveness.Liveness`` does."""

    can_lose_held = True        # as PostgreSQL's: a restart of the store frees every lock

    def __init__(self, locks: SimLocks, process: str, store: ProcessStore | None = None):
        self.locks, self.process, self.store = locks, process, store

    def _cut(self) -> bool:
        return self.store is not None and self.store.partitioned

    def hold(self, name: str) -> bool:
        if self._cut():        # the lock's session cannot be reached: nothing taken (the server keeps what it had)
            raise StorePartitioned("store unreachable (simulated partition)")
        return self.locks.owners.setdefault(name, self.process) == self.process

    def holds(self, name: str) -> bool:
        # cut off, the check fails, and AdvisoryLocks answers "gone" on an error
        return not self._cut() and self.locks.owners.get(name) == self.process

    def release(self, name: str) -> None:
        if self.holds(name):
            del self.locks.owners[name]

    def free_among(self, names) -> tuple[set[str], float]:
        if self._cut():
            raise StorePartitioned("store unreachable (simulated partition)")
        return {name for name in names if name not in self.locks.owners}, clock.store_now()

    def close(self) -> None:
        self.locks.crash(self.process)


class SimProcess:
    """A driver process as the worker sees it: the subset of ``subprocess.Popen`` it uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.returncode = -9

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


class Proc:
    def __init__(self, name: str, kind: str, store: ProcessStore):
        self.name, self.kind, self.store = name, kind, store
        self.obj = None
        self.skew = 0.0
        self.paused = False
        self.crashed = False
        self.reconciling = None       # a coordinator's reconcile pass in progress
        self.last_beat = -1e9
        self.watched_at = -1e9        # a worker's last liveness check (its watch thread's)
        self.stalled = None           # a leader stalled just before a cleanup step (testing/stalls.py)

    @property
    def runnable(self) -> bool:
        if self.kind == "driver":
            return self.obj.alive and not self.paused
        return not self.crashed and not self.paused
