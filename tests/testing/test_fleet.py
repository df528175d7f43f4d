"""The fleet helper against a real coordinator on SQLite: simulated drivers go through the
real worker and reporter, and every job converges as it would with Spark behind it."""

from __future__ import annotations

import time

from sqlalchemy import func, select

from seatide import intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.fleet import Fleet, submit_fleet_jobs


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _statuses(store, ids):
    with store.read() as conn:
        return dict(conn.execute(select(s.jobs.c.job_id, s.jobs.c.status).where(s.jobs.c.job_id.in_(ids))).all())


def _newest_checkpoints(store, ids):
    with store.read() as conn:
        return dict(conn.execute(select(s.checkpoints.c.job_id, func.max(s.checkpoints.c.created_at))
                                 .where(s.checkpoints.c.job_id.in_(ids), s.checkpoints.c.status == "COMPLETED")
                                 .group_by(s.checkpoints.c.job_id)).all())


def test_twenty_jobs_converge_on_a_real_coordinator(tmp_path):
    data_dir = str(tmp_path)
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    batch = submit_fleet_jobs(store, data_dir, 10, streaming=False, interval_ms=200, prefix="fleet-batch")
    stream = submit_fleet_jobs(store, data_dir, 10, streaming=True, interval_ms=200, prefix="fleet-stream")
    coordinator = Coordinator(store, node_id="c-fleet", tick=0.1).start()
    fleet = Fleet(store, data_dir, workers=2, slots=10, bounded_batches=3).start()
    try:
        # Deadlines, not expectations: on a quiet machine this takes a few seconds.
        wait_until(lambda: set(_statuses(store, batch).values()) == {"FINISHED"}, 60, "every BATCH job FINISHED")
        wait_until(lambda: set(_statuses(store, stream).values()) == {"RUNNING"}, 30, "every STREAMING job RUNNING")
        seen = wait_until(lambda: (lambda n: n if len(n) == len(stream) else None)(_newest_checkpoints(store, stream)),
                          30, "a checkpoint of every STREAMING job")
        # Fresh: every streaming job completes another checkpoint after the ones just seen.
        wait_until(lambda: all(at > seen[j] for j, at in _newest_checkpoints(store, stream).items()), 30,
                   "a newer checkpoint of every STREAMING job")

        with store.read() as conn:
            rows = dict(conn.execute(select(s.pipelines.c.job_id, s.pipelines.c.rows_written)
                                     .where(s.pipelines.c.job_id.in_(batch))).all())
            attempts = conn.execute(select(func.count()).select_from(s.attempts)).scalar()
        assert set(rows.values()) == {30}, "each BATCH pipeline committed its three batches once"
        assert attempts == 20, "one attempt per job: no driver was lost or replaced"

        for job_id in stream[:5]:
            intents.stop(store, job_id, actor="test")
        intents.stop(store, stream[5], savepoint=True, actor="test")
        wait_until(lambda: set(_statuses(store, stream[:5]).values()) == {"CANCELED"}, 30, "cancels to land")
        wait_until(lambda: _statuses(store, [stream[5]])[stream[5]] == "SAVEPOINT_DONE", 30, "the savepoint")
        assert set(_statuses(store, stream[6:]).values()) == {"RUNNING"}, "the others run on"
        assert fleet.stats.errors == 0 and fleet.stats.fenced == 0
        assert fleet.stats.started == 20
    finally:
        fleet.stop()
        coordinator.stop()
        store.dispose()
