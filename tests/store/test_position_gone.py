"""A resume whose source position is gone from its server (a dropped replication slot, a purged
binlog file): recorded failed before any driver starts (store/restore.py ``positions_gone``).

What the servers say is stubbed here by the check the resume is given; the real check against real
servers, and that no driver starts a JVM, is tests/databases/test_cdc_jobs.py's."""

from __future__ import annotations

from sqlalchemy import select

from seatide.config.loader import load_job_text
from seatide.coordinator import reconcile as r
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.restore import resume_job
from seatide.timeouts import Timeouts
from tests.store.test_store import JOB, _end, store, submit  # noqa: F401  (store is a fixture)

GONE = "replication slot 'seatide_j1_1_source0' no longer exists: submit it again"


def _resume(store, answer: dict[int, str]) -> list:
    asked = []

    def positions_gone(job, plan, restored):
        asked.append([pipeline_id for pipeline_id, _, _ in restored])
        return answer

    resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={},
               positions_gone=positions_gone)
    return asked


def _state(store):
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        pipelines = conn.execute(select(s.pipelines).where(
            s.pipelines.c.job_id == "j1", s.pipelines.c.incarnation == job.incarnation)).all()
        kinds = [e.kind for e in conn.execute(select(s.events).where(s.events.c.job_id == "j1"))]
    return job, pipelines, kinds


def test_a_resume_whose_position_is_gone_is_recorded_failed_and_the_leader_ends_it_without_a_driver(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    assert _resume(store, {1: GONE}) == [[1]]           # the pipeline restored in place is asked about
    job, pipelines, kinds = _state(store)
    assert (job.incarnation, job.status, job.current_attempt) == (2, "PENDING", None)
    assert [(p.status, p.error) for p in pipelines] == [("FAILED", GONE)]
    assert "SOURCE_POSITION_GONE" in kinds
    decided = r.reconcile_job(r.Snapshot(job, None, pipelines, {"w1": None}, now=job.updated_at), Timeouts())
    assert decided == [r.Finish(r.JobStatus.FAILED, GONE)]      # no CreateAttempt, no retry


def test_a_resume_whose_position_is_there_starts_as_before(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    assert _resume(store, {}) == [[1]]
    job, pipelines, kinds = _state(store)
    assert (job.status, [p.status for p in pipelines]) == ("CREATED", ["CREATED"])
    assert "SOURCE_POSITION_GONE" not in kinds
