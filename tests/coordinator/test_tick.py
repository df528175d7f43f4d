"""The leader's reconcile tick over many jobs, on a real store: one job's failure stays
that job's, a tick never assigns a worker more attempts than it has slots, and reading
the jobs takes the same few queries for one job or twenty."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import event, select, update

from seatide import clock
from seatide import intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.jobs import CONSOLE_JOB as JOB
from tests.leader import lead_once


@pytest.fixture
def leader(store_url, tmp_path):
    store = open_store(store_url)
    coordinator = Coordinator(store, node_id="c-tick")
    assert coordinator.lease.tick()
    yield coordinator, store, str(tmp_path)
    store.dispose()


def _submit(store, data_dir, job_id):
    return intents.submit(store, data_dir, text=JOB, job_id=job_id, actor="test").job_id


def _job(store, job_id):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()


def _ticks(coordinator, n):
    for _ in range(n):
        lead_once(coordinator)


def test_one_jobs_failure_does_not_stop_the_tick_for_the_others(leader, monkeypatch):
    coordinator, store, data_dir = leader
    monkeypatch.setattr("seatide.coordinator.service.RECONCILE_BACKOFF_S", 60.0)   # one failure per test
    register_node(store, "w1", "worker", slots=4)
    _submit(store, data_dir, "broken")
    _submit(store, data_dir, "healthy")
    with store.write() as conn:   # a row no transition leads out of: deciding about it raises
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "broken").values(desired="CANCEL"))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "broken").values(status="BOGUS"))
    _ticks(coordinator, 4)
    assert _job(store, "healthy").status == "SCHEDULED", "the healthy job was scheduled despite its neighbour"
    with store.read() as conn:
        errors = conn.execute(select(s.events).where(s.events.c.job_id == "broken",
                                                     s.events.c.kind == "RECONCILE_ERROR")).all()
    assert errors and "BOGUS" in errors[0].detail
    # backed off: the three ticks after the failure leave the broken job alone
    assert len(errors) == 1
    failures, retry_at = coordinator._backoff["broken"]
    assert failures == len(errors)
    assert retry_at > errors[-1].at, "the broken job is not backed off after its last failure"


def test_a_tick_assigns_no_worker_more_attempts_than_its_slots(leader):
    coordinator, store, data_dir = leader
    register_node(store, "w1", "worker", slots=1)
    for job_id in ("a", "b", "c"):
        _submit(store, data_dir, job_id)
    _ticks(coordinator, 4)
    with store.read() as conn:
        assigned = conn.execute(select(s.attempts).where(s.attempts.c.worker_id == "w1")).all()
    assert len(assigned) == 1, [a.job_id for a in assigned]
    assert sorted(_job(store, j).status for j in "abc") == ["PENDING", "PENDING", "SCHEDULED"]


def test_reading_the_jobs_takes_the_same_queries_for_one_job_or_twenty(leader):
    coordinator, store, data_dir = leader
    register_node(store, "w1", "worker", slots=100)
    _submit(store, data_dir, "j0")
    counts = []
    for total in (1, 20):
        for n in range(1, total):
            _submit(store, data_dir, f"j{n}") if _job(store, f"j{n}") is None else None
        statements = []

        def count(conn, cursor, statement, *args):
            statements.append(statement)

        event.listen(store.engine, "before_cursor_execute", count)
        try:
            snaps, _ = coordinator._snapshots(time.time(), clock.monotonic())
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        assert len(snaps) == total
        assert all(not hasattr(snap.job, "config") for snap in snaps), "the tick read the jobs' config text"
        counts.append(len([q for q in statements if q.lstrip().upper().startswith("SELECT")]))
    assert counts[0] == counts[1], counts


def test_every_stamp_a_silence_is_judged_by_is_watched_on_the_leaders_own_clock(leader):
    """A step of the store's clock must not lengthen any silence the leader acts on (outside
    review of stop 63): the worker's heartbeat, the attempt's launch and heartbeat, the job's
    last change (a cancel's grace) are in the snapshot's ``seen_from``."""
    coordinator, store, data_dir = leader
    register_node(store, "w1", "worker", slots=1)
    _submit(store, data_dir, "watched")
    _ticks(coordinator, 2)
    snaps, _ = coordinator._snapshots(time.time(), clock.monotonic())
    snap = snaps[0]
    assert snap.attempt is not None
    stamps = [snap.workers["w1"].heartbeat_at, snap.job.updated_at, snap.attempt.created_at]
    assert all(stamp in snap.seen_from for stamp in stamps), (stamps, snap.seen_from)
    # Unchanged since the ticks before: seen to stand since before this pass's now.
    assert snap.seen_from[snap.workers["w1"].heartbeat_at] <= snap.now
