"""A reconcile pass longer than the lease, on a real store: the leader keeps its lease by
renewing between steps (the cleanups' too, not only the per-job loop's), and a step that
outlasts the lease on its own loses it, with why and what the loop was doing recorded.

The steps are slowed by the ``coordinator.before_cleanup`` failpoint: each cleanup is a
short real step, but together they take longer than the lease ttl."""

from __future__ import annotations

import contextlib
import gc

import pytest
from sqlalchemy import select

from seatide import failpoints, intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import NotLeader, open_store
from seatide.testing.jobs import CONSOLE_JOB as JOB
from seatide.timeouts import Timeouts

# Long enough that a real step at load ≈15 (deciding a job took 1.2 s there) stays inside it: the
# failpoint's sleeps, in ttl units, are what must outlast it, not the machine's speed.
TTL = 3.0


@pytest.fixture
def leader(store_url, tmp_path):
    store = open_store(store_url)
    coordinator = Coordinator(store, node_id="c-long-pass", data_dir=str(tmp_path),
                              timeouts=Timeouts(lease_ttl=TTL, lease_renew=TTL / 4))
    yield coordinator, store, str(tmp_path)
    store.dispose()


@contextlib.contextmanager
def _no_garbage_collection():
    """The steps run in the pytest process, whose heap holds the whole run's objects: a full
    garbage collection there walked 0.3-0.8 million of them, up to 1.5 s of CPU: the likeliest
    cause of a "reading due cleanups" step of 3.65 s at load 6 once, which lost the lease a step
    early. A coordinator's own heap is a few MB. The steps' time must be theirs and the failpoint's."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _canceled_jobs(store, data_dir, n: int) -> list[str]:
    """Jobs cancelled before they were scheduled: the first pass ends them, and their cleanup is
    due at once (no worker needed)."""
    ids = []
    for i in range(n):
        job_id = intents.submit(store, data_dir, text=JOB, job_id=f"long-{i}", actor="test",
                                cleanup_delay_s=0).job_id
        intents.stop(store, job_id, actor="test")
        ids.append(job_id)
    return ids


def _cleanups(store) -> list[str]:
    with store.read() as conn:
        return sorted(r.cleanup for r in conn.execute(select(s.job_results.c.cleanup)))


def test_a_pass_of_cleanups_longer_than_the_lease_keeps_it(leader, monkeypatch):
    coordinator, store, data_dir = leader
    _canceled_jobs(store, data_dir, 5)
    monkeypatch.setitem(failpoints._POINTS, "coordinator.before_cleanup", f"sleep:{TTL * 0.4}")
    with _no_garbage_collection():   # before the election: its collection took 3.7 s once
        assert coordinator.lease.tick()
        coordinator.reconcile_all()      # five cleanups of 0.4 ttl each: twice the lease in one pass
    assert _cleanups(store) == ["CLEAN"] * 5, "the pass stopped short: it lost its lease on the way"
    assert coordinator.lease.is_leader
    assert coordinator.lease.losses_total == 0, list(coordinator.lease.losses)
    gap, step, _ = coordinator.lease.widest_gap
    assert gap < TTL, f"{gap} s between two renewals (slowest step: {step})"


def test_a_step_longer_than_the_lease_loses_it(leader, monkeypatch):
    coordinator, store, data_dir = leader
    _canceled_jobs(store, data_dir, 2)
    # One step alone outlasts the lease: nothing renews behind the loop's back, so the step's
    # own write is fenced, the pass ends, and the next renewal is refused and recorded.
    monkeypatch.setitem(failpoints._POINTS, "coordinator.before_cleanup", f"sleep:{TTL * 1.5}")
    with _no_garbage_collection():
        assert coordinator.lease.tick()
        epoch = coordinator.lease.epoch
        with pytest.raises(NotLeader):
            coordinator.reconcile_all()
    assert not coordinator.lease.is_leader
    assert _cleanups(store) == ["DIRTY", "DIRTY"], "a cleanup was recorded after the lease ran out"
    monkeypatch.delitem(failpoints._POINTS, "coordinator.before_cleanup")
    assert coordinator.lease.tick() and coordinator.lease.epoch == epoch + 1, "elected anew, by expiry"
    [loss] = coordinator.lease.losses
    assert (loss.epoch, loss.why, loss.slowest_step) == (epoch, "renewal refused", "a cleanup step")
    assert loss.since_renewal_s >= loss.slowest_step_s >= TTL
