"""A worker's liveness lock lost while it lives (issue 33, the store restart row): its drivers
live on through a restart of the store's server, and die for any other loss of the lock.

A real private PostgreSQL (restarted with ``pg_ctl restart -m fast``, as an operator or a
managed failover would), a real ``Worker`` holding its lock on its own session and a real
child process standing for its driver (``sleep``: killed or not is what is asserted). The
worker's watch is driven by the test, every ``LIVENESS_CHECK_S`` as its thread would; the
leader's view is the real ``AdvisoryLocks.free_among`` a coordinator reads.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from sqlalchemy import select, text

from seatide.coordinator.service import register_node
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.liveness import AdvisoryLocks, worker_lock
from seatide.testing.cluster import wait_for
from seatide.testing.servers import PrivatePostgres
from seatide.timeouts import LIVENESS_CHECK_S, Timeouts
from seatide.worker.agent import Worker

# The grace (worker_lost_after) is short so the test sees it end, and long against a slow start.
TIMEOUTS = Timeouts(driver_heartbeat_interval=0.5, driver_self_fence_after=2.0, driver_hung_after=4.0,
                    worker_heartbeat_interval=0.5, worker_lost_after=4.0)
ATTEMPT = 7_000_001


@pytest.fixture(scope="module")
def server():
    server = PrivatePostgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def worker(server, tmp_path):
    url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    store = open_store(url)
    locks = AdvisoryLocks(url, TIMEOUTS)
    register_node(store, "c-now", "coordinator")        # this version's: it keeps the grace
    worker = Worker(store, url, str(tmp_path), node_id="w-regain", slots=1, timeouts=TIMEOUTS, liveness=locks)
    worker._take_liveness_lock()
    worker.register()
    driver = subprocess.Popen(["sleep", "600"])
    worker.children[ATTEMPT] = driver
    try:
        yield worker
    finally:
        driver.kill()
        driver.wait()
        locks.close()
        with store.write() as conn:
            conn.execute(s.nodes.delete())
        store.dispose()


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
        time.sleep(LIVENESS_CHECK_S)


def _heartbeat_and_store_now(worker: Worker) -> tuple[float, float]:
    with worker.store.read() as conn:
        beat = conn.execute(select(s.nodes.c.heartbeat_at).where(s.nodes.c.node_id == worker.node_id)).scalar_one()
        return beat, read_store_now(conn)


def test_a_restart_of_the_stores_server_leaves_the_workers_drivers_running(server, worker):
    [driver] = worker.children.values()
    leader = AdvisoryLocks(worker.store_url, TIMEOUTS)
    try:
        server.restart_server("fast")
        restarted = time.monotonic()
        _watch_until_settled(worker)
        assert driver.poll() is None, "the driver was killed over a restart"
        assert ATTEMPT in worker.children and not worker._killed_for_outage
        beat, now = _heartbeat_and_store_now(worker)
        assert now - beat < time.monotonic() - restarted + 1, "no heartbeat since the restart"
        # The leader's side: no lock is free in the grace after a restart, even one nobody holds,
        # and then the free one is, while the worker's (held again) is not.
        gone = worker_lock("w-never")
        assert leader.free_among([gone, worker_lock(worker.node_id)]) == set()
        assert leader.server_up_for() < TIMEOUTS.lock_restart_grace
        wait_for(lambda: leader.free_among([gone, worker_lock(worker.node_id)]) == {gone}, 30, interval=0.1,
                 message="the grace after the restart to end")
        assert leader.server_up_for() >= TIMEOUTS.lock_restart_grace
    finally:
        leader.close()


def _terminate_lock_session(worker: Worker) -> None:
    with worker.store.write() as conn:
        ended = conn.execute(text(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid::bigint = :c AND objid::bigint = :o"),
            dict(zip("co", AdvisoryLocks.key(worker_lock(worker.node_id))))).scalars().all()
    assert ended == [True]


def test_a_lock_session_ended_on_a_server_that_kept_serving_kills_the_drivers(worker):
    [driver] = worker.children.values()
    worker.check_liveness_lock()                 # seen held: after the server's start
    _terminate_lock_session(worker)
    _watch_until_settled(worker)
    assert driver.wait(timeout=10) == -9, "a driver lived on after its worker's lock was taken on a serving server"
    assert ATTEMPT not in worker.children        # its exit recorded, the worker registered afresh


def test_a_restart_with_an_older_coordinator_registered_kills_the_drivers(server, worker):
    """A coordinator of an older SeaTide knows no grace: once elected, it would take a free lock
    right after the restart as a death. While one may lead, a lost lock kills the drivers."""
    [driver] = worker.children.values()
    with worker.store.write() as conn:
        conn.execute(s.nodes.update().where(s.nodes.c.node_id == "c-now").values(features=None))
    server.restart_server("fast")
    _watch_until_settled(worker)
    assert driver.wait(timeout=10) == -9
