"""Every instant the leader compares is the store's, whoever wrote it (DESIGN §1.5).

A driver, worker or client whose clock is off by minutes still stamps its writes with the
store's time: the leader compares them with the store's ``now``, so a stamp from a skewed
host would open (or never open) the staleness, hang and cancel windows by the skew. On
PostgreSQL the store's clock is the server's; the process clock is skewed here by
``clock.use``, as a host whose clock runs behind.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select, update

from seatide import clock
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.jobs import request_stop
from tests.store.test_store import _attempt, store, submit  # noqa: F401  (store is a fixture)
from tests.stores import postgresql_only

SKEW_S = -30.0      # this process's clock runs 30 s behind the store's
CLOSE_S = 5.0


@pytest.fixture
def skewed_clock():
    previous = clock.use(lambda: time.time() + SKEW_S, monotonic=clock.real_monotonic)
    yield
    clock.use(previous)


def _near_store_now(store, stamps: dict[str, float | None]) -> None:
    with store.read() as conn:
        now = read_store_now(conn)
    off = {name: round(value - now, 1) for name, value in stamps.items()
           if value is None or abs(value - now) > CLOSE_S}
    assert not off, f"stamps not on the store's clock (seconds off): {off}"


@postgresql_only
def test_a_skewed_driver_stamps_progress_pipelines_and_checkpoints_with_the_stores_clock(store, tmp_path,
                                                                                          skewed_clock):
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    reporter.pipeline_status(1, "RUNNING")
    reporter.task_progress(3)
    reporter.source_ended(1, "source0")
    reporter.batch_committed(1, 0, 10, 5, None, "f")
    with store.read() as conn:
        attempt = conn.execute(select(s.attempts)).one()
        pipeline = conn.execute(select(s.pipelines)).one()
        checkpoint = conn.execute(select(s.checkpoints)).one()
        ended = conn.execute(select(s.source_ends.c.ended_at)).scalar()
        newest_event = conn.execute(select(s.events.c.at).order_by(s.events.c.seq.desc()).limit(1)).scalar()
    _near_store_now(store, {"attempt.progress_at": attempt.progress_at, "pipeline.started_at": pipeline.started_at,
                            "pipeline.last_checkpoint_at": pipeline.last_checkpoint_at,
                            "checkpoint.created_at": checkpoint.created_at, "source_end.ended_at": ended,
                            "event.at": newest_event})


@postgresql_only
def test_a_skewed_client_stamps_its_submission_and_stop_request_with_the_stores_clock(store, tmp_path,
                                                                                     skewed_clock):
    submit(store, tmp_path)
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
    _near_store_now(store, {"job.created_at": job.created_at, "job.updated_at": job.updated_at})
    with store.write() as conn:      # the leader has moved it on, with its own (store) stamps
        conn.execute(update(s.jobs).values(status="RUNNING", updated_at=0.0))
    request_stop(store, "j1")
    with store.read() as conn:
        # The cancel grace is counted from this stamp by the leader, on the store's clock.
        _near_store_now(store, {"job.updated_at (stop request)": conn.execute(select(s.jobs.c.updated_at)).scalar()})
