"""A worker's liveness lock lost while it lives (issue 33, the store restart row): its drivers
live on when the lock is back with a heartbeat inside the leader's window, and die by the
window's end less the margin when it is not, however the worker's own tries fare.

A real private PostgreSQL (restarted with ``pg_ctl restart -m fast``, as an operator or a
managed failover would, or stopped for as long as a test wants), a real ``Worker`` holding its
lock on its own session, and a real child process standing for its driver (``sleep``: killed or
not is what is asserted). The worker's watch is driven by the test, as its thread would run it,
or runs in its own thread where a check must block. A worker's launch gate is shown on SQLite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import types

import pytest
from sqlalchemy import select

from seatide import clock, intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.liveness import AdvisoryLocks, worker_lock
from seatide.store.states import AttemptState
from seatide.testing.cluster import wait_for
from seatide.testing.jobs import CONSOLE_JOB
from seatide.testing.servers import PrivatePostgres
from seatide.timeouts import FENCE_MARGIN_S, Timeouts
from seatide.worker.agent import Worker
from seatide.worker.driver_log import DriverLog
from seatide.worker.launch import UNLAUNCHED
from seatide.worker.lock_regain import LockState
from seatide.worker import warm_pool
from seatide.worker.warm_pool import WarmDriver, WarmPool

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
    worker._regain.seen_held(worker._take_liveness_lock())
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
        if worker._regain.state is LockState.HELD and worker.liveness.holds(worker_lock(worker.node_id)):
            return
        assert time.monotonic() < deadline, "the worker never held its lock again"
        time.sleep(0.05)


def _assert_fenced_in_the_window(worker: Worker, kill_by: float) -> None:
    """Killed no sooner than the window's end (a lock back in time would have saved them), and
    before the margin that separates it from the leader's earliest verdict had run out."""
    fenced_at = worker._regain.fenced_at
    assert fenced_at is not None and kill_by <= fenced_at < kill_by + FENCE_MARGIN_S, \
        f"fenced at {fenced_at - kill_by:+.3f} s from the window's end"


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
        assert worker._regain.state is LockState.AWAY and driver.poll() is None
        kill_by = worker._regain.kill_by()
        fence.start()
        assert driver.wait(timeout=30) == -9
        assert worker._regain.state is LockState.FENCED
        _assert_fenced_in_the_window(worker, kill_by)
        assert ATTEMPT in worker._killed_for_outage   # its exit is the outage's, not charged to the job
        server.start_server()
        down = False
        _watch_until_settled(worker)                  # it records the exit and registers afresh
        assert ATTEMPT not in worker.children and worker._regain.may_launch(clock.monotonic())
    finally:
        if down:
            server.start_server()
        _close(worker)
        fence.join(timeout=5)


def test_a_check_of_the_lock_that_never_answers_kills_the_drivers_by_the_windows_end(server, tmp_path):
    """The lock session's server process is stopped (SIGSTOP): the check asked on it answers
    nothing, as on a connection a failover black-holed, while the lock may be free to a new
    server for all the worker knows. The worker's own watch and fence threads run; the fence
    must kill the driver by the window's end without the loss ever being seen. Woken, the
    session answers that it still holds the lock: the worker registers afresh and launches again."""
    worker = _worker(server, tmp_path, SHORT)
    backend = worker.liveness._conn.info.backend_pid
    stopped = False
    try:
        [driver] = worker.children.values()
        worker.start_liveness_watch()               # as Worker.run, before its loop: shown held, then the threads
        os.kill(backend, signal.SIGSTOP)
        stopped = True
        assert driver.wait(timeout=30) == -9, "the driver outlived a window in which its lock was never shown held"
        assert worker._regain.state is LockState.FENCED
        _assert_fenced_in_the_window(worker, worker._regain.kill_by())
        assert ATTEMPT in worker._killed_for_outage
        # Fenced, it launches nothing, so it stops saying it would: no heartbeat lands meanwhile.
        worker.start_heartbeat()
        fenced_beat = _heartbeat_at(worker)
        time.sleep(2.5 * SHORT.worker_heartbeat_interval)    # a bounded look for a beat that must not come
        assert _heartbeat_at(worker) == fenced_beat, "a fenced worker went on heartbeating"
        os.kill(backend, signal.SIGCONT)
        stopped = False
        wait_for(lambda: worker._regain.state is LockState.HELD and ATTEMPT not in worker.children, 30,
                 interval=0.05, message="the worker to record the killed driver and hold its lock again")
        wait_for(lambda: _heartbeat_at(worker) > fenced_beat, 30, interval=0.05,
                 message="the worker to heartbeat again once it holds its lock")
    finally:
        if stopped:
            os.kill(backend, signal.SIGCONT)
        _close(worker)


def test_a_claimed_attempt_that_starts_no_driver_never_stays_launching(tmp_path):
    """The claim and the reads before a fork need the store; the fence waits for none of them.
    A launch whose lock is not shown held starts nothing and ends its attempt as the outage's,
    uncharged; a fork the host refuses ends it at once as a failed start, charged (one that
    fails every time must run out of retries); a launch the store's absence cut short leaves
    it to the loop's next step, which ends it as the outage's. Never stuck in LAUNCHING until
    the leader's launch timeout charges the job (SQLite: the gate is the worker's)."""
    data_dir = str(tmp_path)
    url = default_store_url(data_dir)
    store = open_store(url)
    started = []

    class Launcher:
        def start(self, command, *args):
            started.append(command)
            if "unforked" in command:
                raise OSError(11, "Resource temporarily unavailable")      # fork: EAGAIN
            raise ConnectionError("store unreachable")                      # as a launch cut off from the store

    worker = Worker(store, url, data_dir, node_id="w", slots=3, timeouts=SHORT, launcher=Launcher())
    coordinator = Coordinator(store, node_id="c", data_dir=data_dir, timeouts=SHORT)

    def attempt_of(job_id: str):
        if coordinator.lease.tick():
            coordinator.reconcile_all()
        with store.read() as conn:
            return conn.execute(select(s.attempts).where(s.attempts.c.job_id == job_id)).first()

    try:
        worker.register()
        for job_id in ("gated", "unforked", "cut"):
            intents.submit(store, data_dir, text=CONSOLE_JOB, job_id=job_id, actor="test")
            wait_for(lambda: getattr(attempt_of(job_id), "state", None) == AttemptState.ASSIGNED, 30, interval=0.05,
                     message=f"the leader to assign {job_id}'s attempt to the worker")
        with worker._regain.mutex:
            worker._regain.seen_gone()          # found gone between the loop's look and the fork
        worker._launch_claimed(attempt_of("gated"))
        gated = attempt_of("gated")
        assert not started and gated.state == AttemptState.FAILED and gated.error == UNLAUNCHED and not gated.charged
        with worker._regain.mutex:
            worker._regain.seen_held(clock.monotonic())
        with pytest.raises(OSError):
            worker._launch_claimed(attempt_of("unforked"))
        unforked = attempt_of("unforked")
        assert unforked.state == AttemptState.FAILED and unforked.charged
        assert unforked.error.startswith("its driver could not be started: [Errno 11]")
        with pytest.raises(ConnectionError):
            worker._launch_claimed(attempt_of("cut"))
        assert attempt_of("cut").state == AttemptState.LAUNCHING
        worker.step()
        cut = attempt_of("cut")
        assert cut.state == AttemptState.FAILED and cut.error == UNLAUNCHED and not cut.charged
        assert len(started) == 2 and not worker.children
    finally:
        store.dispose()


def test_a_fence_kills_the_warm_driver_being_handed_an_attempt(tmp_path, monkeypatch):
    """A hand-off to a warm driver waits up to 2 s for its answer, outside the liveness mutex, and
    the worker counts the driver among its children only after it: a fence meanwhile must kill
    it all the same (the pool's ``handing``), and the launch that resumes records it as the
    outage's. A real process stands for the warm driver; it never answers, so the hand-off is
    held until the test closes its signal pipe, whatever the machine's speed."""
    monkeypatch.setattr(warm_pool, "HAND_OVER_ACK_TIMEOUT", 120.0)
    data_dir = str(tmp_path)
    url = default_store_url(data_dir)
    store = open_store(url)
    worker = Worker(store, url, data_dir, node_id="w", timeouts=SHORT)
    signals_read, signals_write = os.pipe()
    proc = subprocess.Popen(["sleep", "600"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    warm = WarmDriver(proc, signals_read)
    worker.warm_pool = WarmPool(1, ["unused"], {})
    worker.warm_pool.idle.append(warm)
    worker._hand_to_warm_driver = lambda attempt, conf, log_file, go_on: worker.warm_pool.take(
        attempt.job_id, attempt.attempt_id, {}, log_file, go_on)
    attempt = types.SimpleNamespace(job_id="handed", attempt_id=ATTEMPT)
    launched = []
    launch = threading.Thread(target=lambda: launched.append(worker._start_driver(
        attempt, ["unused"], {}, DriverLog(str(tmp_path / "driver.log"), frozenset()))), daemon=True)
    try:
        launch.start()
        # past go_on (a fence before it ends the hand-off at once, without a driver being handed):
        # the order is written and the hand-off waits for the driver's answer
        wait_for(lambda: worker.warm_pool.handing is warm and proc.stdin.closed, 10, interval=0.01,
                 message="the hand-off to wait for the driver's answer")
        worker._fence("the test's fence")
        assert proc.wait(timeout=30) == -9, "the driver being handed the attempt outlived the fence"
        assert worker.warm_pool.handing is warm, "killed only once the hand-off had ended"
        os.close(signals_write)                     # the hand-off sees the pipe closed and ends
        signals_write = None
        launch.join(timeout=30)
        assert launched == [None]
        assert worker.children.get(ATTEMPT) is proc and ATTEMPT in worker._killed_for_outage
    finally:
        if proc.poll() is None:
            proc.kill()
        if signals_write is not None:
            os.close(signals_write)
        store.dispose()
