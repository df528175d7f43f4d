"""Every timeout in one place: the margins safety rests on are asserted at start-up, bad
combinations are refused naming the flags (exit 2 from a cluster process), and every
setting is documented with its flag and default."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.runtime.heartbeat import Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.timeouts import FENCE_MARGIN_S, SETTINGS, Timeouts, TimeoutsError, timeouts_from_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_defaults_keep_every_margin():
    assert Timeouts().check() == Timeouts()


@pytest.mark.parametrize("changed, named", [
    (dict(lease_renew=1.0), "--lease-renew = 1 s must be at most --lease-ttl / 3"),
    (dict(driver_self_fence_after=9.0), "--driver-self-fence-after + --heartbeat-interval + 1 s margin = 11 s "
                                        "must be at most --driver-heartbeat-timeout = 10 s"),
    (dict(driver_hung_after=7.9, worker_lost_after=20.0), "must be at most --driver-heartbeat-timeout = 7.9 s"),
    (dict(worker_lost_after=8.5), "must be at most --worker-heartbeat-timeout = 8.5 s"),
    (dict(worker_heartbeat_interval=3.5),
     "--worker-heartbeat-interval = 3.5 s must be at most --worker-heartbeat-timeout / 3"),
    (dict(driver_heartbeat_interval=3.0, driver_self_fence_after=1.0, driver_hung_after=8.0,
          worker_lost_after=20.0), "--heartbeat-interval = 3 s must be at most --driver-heartbeat-timeout / 3"),
    (dict(cancel_grace=1.5), "2 x --heartbeat-interval = 2 s must be at most --cancel-grace = 1.5 s"),
    (dict(launch=0.0), "--launch-timeout must be a positive number of seconds, got 0"),
    (dict(driver_exit_grace=-1.0), "--driver-exit-grace must be a positive number of seconds, got -1"),
    (dict(lease_ttl=float("nan")), "--lease-ttl must be a positive number of seconds, got nan"),
])
def test_an_unsafe_combination_is_refused_naming_its_flags(changed, named):
    with pytest.raises(TimeoutsError) as refused:
        Timeouts(**changed).check()
    assert named in str(refused.value)


def test_a_driver_stops_itself_strictly_before_the_leader_may_replace_it():
    t = Timeouts()
    assert t.driver_stops_within == t.driver_self_fence_after + t.driver_heartbeat_interval + FENCE_MARGIN_S
    # At the edge it is allowed; a hair beyond, refused.
    edge = Timeouts(driver_hung_after=t.driver_stops_within)
    assert edge.check() is edge
    with pytest.raises(TimeoutsError, match="a driver must stop itself before the leader may replace it"):
        Timeouts(driver_hung_after=t.driver_stops_within - 0.01).check()


def test_every_broken_margin_is_reported_at_once():
    with pytest.raises(TimeoutsError) as refused:
        Timeouts(lease_renew=5.0, cancel_grace=1.0).check()
    assert "--lease-renew" in str(refused.value) and "--cancel-grace" in str(refused.value)


def test_cleanup_may_be_immediate():
    assert Timeouts(state_cleanup_delay=0.0).check().state_cleanup_delay == 0.0


def test_flags_not_given_keep_their_defaults():
    t = timeouts_from_flags({"lease_ttl": 3.0, "driver_hung_after": None, "slots": 2})
    assert t == Timeouts(lease_ttl=3.0)


def _cluster_process(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    return subprocess.run([sys.executable, "-m", "seatide.cli.main", "cluster", *args], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.parametrize("role", ["coordinator", "worker"])
def test_a_cluster_process_with_unsafe_timeouts_exits_2_naming_them(role, tmp_path):
    done = _cluster_process(role, "--data-dir", str(tmp_path), "--driver-self-fence-after", "10",
                            "--lease-renew", "1.5")
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("seatide: unsafe timeouts: ") and "Traceback" not in done.stderr
    assert "--driver-self-fence-after" in last and "--lease-renew" in last and "docs/operations.md" in last
    assert not os.path.exists(tmp_path / "state.db"), "refused before the store was opened"



JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


def _running_attempt(store, data_dir: str) -> AttemptReporter:
    """A real job with a RUNNING attempt, made by the real leader and reporter."""
    register_node(store, "w1", "worker", slots=1)
    job_id = intents.submit(store, data_dir, text=JOB, job_id="fence-deadline", actor="test").job_id
    coordinator = Coordinator(store, node_id="c-fence")
    for _ in range(3):
        assert coordinator.lease.tick()
        coordinator.reconcile_all()
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
    with store.write() as conn:    # as the worker's claim does
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == job.current_attempt)
                     .values(state="LAUNCHING", launched_at=time.time()))
    reporter = AttemptReporter(store, job_id, job.incarnation, job.current_attempt)
    reporter.mark_running(os.getpid())
    return reporter


def test_a_heartbeat_stuck_in_the_store_still_fences_the_driver_on_time(store_url, tmp_path):
    """The store holds the heartbeat's write (a lock held elsewhere, as by a stuck peer or a
    dead TCP connection): the driver still stops by its self-fence deadline, not when the
    store call returns."""
    store = open_store(store_url)
    reporter = _running_attempt(store, str(tmp_path))
    fenced = threading.Event()
    heartbeat = Heartbeat(reporter, interval=0.2, self_fence_after=1.0, on_fenced=fenced.set).start()
    try:
        with store.write() as conn:    # SQLite: the write lock; PostgreSQL: the job row the heartbeat locks
            conn.execute(select(s.jobs).where(s.jobs.c.job_id == reporter.job_id).with_for_update())
            held = time.monotonic()
            assert fenced.wait(10), "the driver kept running with its heartbeat stuck"
            took = time.monotonic() - held
        assert took <= 1.0 + 0.2 + FENCE_MARGIN_S, f"fenced {took:.2f} s after its last heartbeat"
        assert heartbeat.fenced
    finally:
        heartbeat.stop()
        store.dispose()


def test_a_heartbeat_that_meets_its_own_attempts_end_stops_without_fencing(store_url, tmp_path):
    """Found in CI: a beat in flight while the driver recorded its attempt SUCCEEDED was
    refused (the attempt is no longer live) and fenced the driver, whose real process would
    then have exited 75 after a successful end."""
    store = open_store(store_url)
    reporter = _running_attempt(store, str(tmp_path))
    fenced = threading.Event()
    heartbeat = Heartbeat(reporter, interval=3600, self_fence_after=7200, on_fenced=fenced.set)
    try:
        reporter.end_attempt(succeeded=True)
        reporter.ended = False        # the beat read `ended` before the end's write landed
        heartbeat.beat()
        assert not fenced.is_set() and not heartbeat.fenced
        # Another attempt's fence is still a fence.
        other = AttemptReporter(store, reporter.job_id, reporter.incarnation, reporter.attempt_id)
        replaced = Heartbeat(other, interval=3600, self_fence_after=7200, on_fenced=fenced.set)
        replaced.beat()
        assert fenced.is_set() and replaced.fenced
    finally:
        store.dispose()


def test_every_timeout_is_documented_with_its_flag_and_default():
    with open(os.path.join(ROOT, "docs", "operations.md"), encoding="utf-8") as handle:
        doc = handle.read()
    for setting in SETTINGS:
        # the reference table's row (the flag in its own cell), not prose that mentions the flag
        row = next((line for line in doc.splitlines() if f"| `{setting.flag}` |" in line), None)
        assert row is not None, f"{setting.flag} is not in docs/operations.md"
        assert f"| {getattr(Timeouts, setting.name):g} " in row, f"{setting.flag}'s default differs in the docs"
