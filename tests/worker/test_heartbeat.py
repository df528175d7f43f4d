"""A worker is judged alive by its heartbeats, so nothing it does between two of them may
silence it: a launch held longer than ``--worker-heartbeat-timeout`` (a cold import or a
slow fork on a loaded machine; in CI, 6.5 s against a 5 s timeout) must not get the worker
declared lost and its attempt replaced while it is alive and launching that very attempt.
But a worker whose loop is stuck for good must still fall silent and be replaced.

The launch is held by the test (a launcher that waits on an event) while a real coordinator
reconciles against a real SQLite store."""

from __future__ import annotations

import contextlib
import threading
import time

from sqlalchemy import select

from seatide import clock, intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.store.states import AttemptState
from seatide.testing.jobs import CONSOLE_JOB
from seatide.testing.cluster import wait_for
from seatide.testing.sim_machine import SimProcess
from seatide.timeouts import Timeouts
from seatide.worker.agent import Worker

# As short as Timeouts.check allows: a worker is lost after 1.7 s without a heartbeat.
TIMEOUTS = Timeouts(driver_heartbeat_interval=0.1, driver_self_fence_after=0.4, driver_hung_after=2.0,
                    worker_heartbeat_interval=0.1, worker_lost_after=1.7)
PID = 4_000_000


class HeldLauncher:
    """Starts a driver only once the test lets it: the launch is "slow" for as long as the test wants."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()

    def start(self, command, log_file, env, inherit_stdout):
        self.entered.set()
        self.release.wait(60)
        return SimProcess(PID)


def _silence(store, node_id) -> float:
    """Seconds since the node's last heartbeat, by the store's clock (as the leader judges it)."""
    with store.read() as conn:
        beat = conn.execute(select(s.nodes.c.heartbeat_at).where(s.nodes.c.node_id == node_id)).scalar_one()
        return read_store_now(conn) - beat


def _attempts(store, job_id):
    with store.read() as conn:
        return conn.execute(select(s.attempts).where(s.attempts.c.job_id == job_id)).all()


@contextlib.contextmanager
def _launch_held(tmp_path, timeouts: Timeouts):
    """A worker ``w`` in its own thread, held inside the launch of job ``held``'s attempt; yields
    (store, launcher, reconcile) where reconcile runs one pass of a real leader."""
    data_dir = str(tmp_path)
    url = default_store_url(data_dir)
    store = open_store(url)
    coordinator = Coordinator(store, node_id="c", data_dir=data_dir, timeouts=timeouts)
    launcher = HeldLauncher()
    worker = Worker(store, url, data_dir, node_id="w", poll=0.05, timeouts=timeouts, launcher=launcher)
    running = threading.Thread(target=worker.run, name="worker", daemon=True)
    running.start()

    def reconcile() -> None:
        if coordinator.lease.tick():
            coordinator.reconcile_all()

    try:
        intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="held", actor="test")
        wait_for(lambda: reconcile() or launcher.entered.is_set(), 20, interval=0.05,
                 message="the worker to start launching the job's attempt")
        yield store, launcher, reconcile
    finally:
        launcher.release.set()
        worker.stop()
        running.join(30)
        assert not running.is_alive()
        with store.read() as conn:
            assert conn.execute(select(s.nodes.c.stopped).where(s.nodes.c.node_id == "w")).scalar_one(), \
                "a heartbeat landed after the worker recorded its stop"
        store.dispose()


def test_a_worker_keeps_heartbeating_while_a_launch_is_held_past_its_timeout(tmp_path):
    with _launch_held(tmp_path, TIMEOUTS) as (store, launcher, reconcile):
        began = clock.monotonic()
        # Held for two heartbeat timeouts, reconciling all the while as a leader would.
        while clock.monotonic() - began < 2 * TIMEOUTS.worker_lost_after:
            reconcile()
            assert _silence(store, "w") < TIMEOUTS.worker_lost_after, "the worker fell silent while launching"
            time.sleep(0.05)
        [attempt] = _attempts(store, "held")
        assert attempt.state == AttemptState.LAUNCHING and attempt.ended_at is None, \
            f"attempt replaced while its worker was alive and launching it: {attempt.state}, {attempt.error}"
        launcher.release.set()
        wait_for(lambda: _attempts(store, "held")[0].pid == PID, 20, interval=0.05,
                 message="the held launch to record its driver's pid")
        assert len(_attempts(store, "held")) == 1


def test_a_worker_whose_loop_is_stuck_past_the_launch_timeout_falls_silent(tmp_path):
    stuck = Timeouts(**{**TIMEOUTS.__dict__, "launch": 2.0})
    with _launch_held(tmp_path, stuck) as (store, launcher, reconcile):
        began = clock.monotonic()
        wait_for(lambda: reconcile() or _silence(store, "w") > stuck.worker_lost_after, 20, interval=0.05,
                 message="the worker to stop heartbeating once its loop was stuck past --launch-timeout")
        assert clock.monotonic() - began > stuck.launch, "silent before its loop was stuck for --launch-timeout"
