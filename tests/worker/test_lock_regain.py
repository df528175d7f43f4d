"""A worker's liveness lock lost while it lives (issue 33, the store restart row): its drivers
live on when the lock is back with a heartbeat inside the leader's window, and die by the
window's end less the margin when it is not, however the worker's own tries fare.

A real private PostgreSQL (restarted with ``pg_ctl restart -m fast``, as an operator or a
managed failover would, or stopped for as long as a test wants), a real ``Worker`` holding its
lock on its own session, and a real child process standing for its driver (``sleep``: killed or
not is what is asserted). The worker's watch is driven by the test, as its thread would run it.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from sqlalchemy import select

from seatide.coordinator.service import register_node
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.liveness import AdvisoryLocks, worker_lock
from seatide.testing.servers import PrivatePostgres
from seatide.timeouts import Timeouts
from seatide.worker.agent import Worker

# A window of 6 s (heartbeat interval 5 s + the 1 s margin): a restart is back well inside it,
# on a loaded machine too, so the drivers live on whatever the machine's speed.
WIDE = Timeouts(driver_heartbeat_interval=5.0, driver_self_fence_after=10.0, driver_hung_after=20.0,
                worker_heartbeat_interval=1.0, worker_lost_after=20.0)
# A window of 4 s: the drivers must die 3 s after the lock was last seen held. Long enough that
# the worker's own first try, made at once, always comes before it.
SHORT = Timeouts(driver_heartbeat_interval=3.0, driver_self_fence_after=6.0, driver_hung_after=11.0,
                 worker_heartbeat_interval=1.0, worker_lost_after=12.0)
ATTEMPT = 7_000_001


@pytest.fixture(scope="module")
def server():
    server = PrivatePostgres().start()
    try:
        yield server
    finally:
        server.stop()


def _worker(server, tmp_path, timeouts: Timeouts):
    url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    store = open_store(url)
    worker = Worker(store, url, str(tmp_path), node_id="w-regain", slots=1, timeouts=timeouts,
                    liveness=AdvisoryLocks(url, timeouts))
    worker._take_liveness_lock()
    worker.register()
    worker.children[ATTEMPT] = subprocess.Popen(["sleep", "600"])
    return worker


def _close(worker: Worker) -> None:
    worker._stop.set()
    for driver in worker.children.values():
        driver.kill()
        driver.wait()
    worker.liveness.close()
    worker.store.dispose()


def _watch_until_settled(worker: Worker, timeout: float = 60) -> None:
    """The worker's liveness watch, as its thread runs it, until the lock is its own again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            worker.check_liveness_lock()
        except Exception:           # the store is still away: the thread tries again
            pass
        if not worker._lock_lost and worker.liveness.holds(worker_lock(worker.node_id)):
            return
        assert time.monotonic() < deadline, "the worker never held its lock again"
        time.sleep(0.05)


def _heartbeat_at(worker: Worker) -> float:
    with worker.store.read() as conn:
        return conn.execute(select(s.nodes.c.heartbeat_at).where(s.nodes.c.node_id == worker.node_id)).scalar_one()


def _store_now(worker: Worker) -> float:
    with worker.store.read() as conn:
        return read_store_now(conn)


def test_a_restart_of_the_stores_server_inside_the_window_leaves_the_drivers_running(server, tmp_path):
    worker = _worker(server, tmp_path, WIDE)
    try:
        [driver] = worker.children.values()
        worker.check_liveness_lock()                  # seen held just before the restart
        before = _store_now(worker)
        server.restart_server("fast")
        _watch_until_settled(worker)
        assert driver.poll() is None, "the driver was killed over a restart the lock came back from in time"
        assert ATTEMPT in worker.children and not worker._killed_for_outage
        # The heartbeat that cancels the leader's verdict: after the lock went free.
        assert _heartbeat_at(worker) > before
    finally:
        _close(worker)


def test_a_lock_not_back_in_time_kills_the_drivers_even_while_the_worker_is_stuck(server, tmp_path):
    """The server stays down until the driver is dead: "late" is the test's doing, not the
    machine's. After its first try the worker's watch is never run again (as if blocked in a
    connect): its fence thread alone must kill the driver."""
    worker = _worker(server, tmp_path, SHORT)
    fence = threading.Thread(target=worker._fence_lost_lock, daemon=True)
    down = False
    try:
        [driver] = worker.children.values()
        worker.check_liveness_lock()
        server.stop_server()
        down = True
        worker.check_liveness_lock()                  # finds it gone; its try is refused
        assert worker._regain.lost and driver.poll() is None
        fence.start()
        assert driver.wait(timeout=30) == -9
        assert ATTEMPT in worker._killed_for_outage   # its exit is the outage's, not charged to the job
        server.start_server()
        down = False
        _watch_until_settled(worker)                  # it records the exit and registers afresh
        assert ATTEMPT not in worker.children and not worker._lock_lost
    finally:
        if down:
            server.start_server()
        _close(worker)
        fence.join(timeout=5)
