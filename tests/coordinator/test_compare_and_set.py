"""The leader's compare-and-set on a job row is atomic on PostgreSQL (issue 21, finding 5).

Under READ COMMITTED a leader that re-read the job row without locking it could apply a
decision about incarnation 1 (``Finish(FAILED)``) after a resume had created incarnation 2:
the new incarnation would end FAILED before it ran. The two writers are real connections
here, interleaved at the gap: the leader is held by a failpoint right after its re-read,
the resume runs, then the leader goes on.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from sqlalchemy import select, text, update

from seatide import failpoints, intents
from seatide.coordinator import reconcile as r
from seatide.coordinator.effects import Applier
from seatide.store import schema as s
from seatide.store.jobs import job_view
from seatide.store.states import JobStatus
from seatide.testing.cluster import wait_for
from tests.leader import elected
from tests.store.test_store import JOB, _attempt, store  # noqa: F401  (store is a fixture)
from tests.stores import postgresql_only

POINT = "coordinator.apply_after_read"


@pytest.fixture
def held_after_read(tmp_path, monkeypatch):
    gate = str(tmp_path / "go")
    monkeypatch.setitem(failpoints._POINTS, POINT, f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, POINT, 0)
    yield gate


def _resume_waits_or_is_done(store, resumed: threading.Event) -> bool:
    if resumed.is_set():
        return True
    with store.read() as conn:      # the resume's session is waiting for the leader's row lock
        return conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                 "AND datname = current_database()")).scalar() > 0


@postgresql_only
def test_a_leaders_decision_never_lands_on_the_incarnation_a_resume_just_created(store, tmp_path,
                                                                                   held_after_read):
    intents.submit(store, str(tmp_path), text=JOB, job_id="j1", actor="test")
    _attempt(store, "j1", state="RUNNING")
    with store.write() as conn:     # a job whose driver died with its host long ago: resumable
        conn.execute(update(s.jobs).values(status=JobStatus.RUNNING))
        conn.execute(update(s.attempts).values(heartbeat_at=0.0, created_at=0.0))
    lease = elected(store, "c1")
    with store.read() as conn:
        view = job_view(conn, "j1")
    snap = r.Snapshot(view.job, view.attempt, view.pipelines, {}, now=time.time())
    decided = threading.Thread(target=Applier(store, "c1", 60.0).apply,
                               args=(lease.epoch, snap, [r.Finish(JobStatus.FAILED, "decided for incarnation 1")]))
    decided.start()
    wait_for(lambda: failpoints._HITS[POINT] >= 1, 30, message="the leader re-read the job")
    resumed, refused = threading.Event(), []

    def resume():
        try:
            intents.resume(store, "j1", actor="test")
        except intents.Refusal as exc:
            refused.append(str(exc))
        finally:
            resumed.set()

    threading.Thread(target=resume, daemon=True).start()
    wait_for(lambda: _resume_waits_or_is_done(store, resumed), 30, message="the resume ran or waits for the lock")
    open(held_after_read, "w").close()
    decided.join(30)
    resumed.wait(30)
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
    if job.incarnation == 2:
        assert job.status == JobStatus.CREATED, f"incarnation 2 is {job.status}: {job.error_msg}"
    else:
        assert (job.status, refused != []) == (JobStatus.FAILED, True)
    assert os.path.exists(held_after_read)
