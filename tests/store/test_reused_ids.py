"""A job id used again is a new run: what the store shows of the job, and what a resume decides
from, is that run's alone (issue 30, finding 6; the rest of issue 21's finding 8).

Both shapes of reuse: the old run's rows still there (it ended and was cleaned up, so the id
may be submitted again: incarnation N + 1), and forgotten (its history expired: incarnation 1
once more, while its events stay as the audit trail). On both stores: the run's identity in
the event log and the resume's reading of checkpoint rows are the store's own queries.
"""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.jobs import forget_job
from seatide.store.restore import resume_job
from seatide.store.views import job_events
from tests.store.test_store import JOB, store, submit  # noqa: F401  (store is a fixture)


def _job(store):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()


def _end(store, status: str = "CANCELED") -> None:
    job, now = _job(store), time.time()
    with store.write() as conn:
        conn.execute(update(s.jobs).values(status=status, finished_at=now))
        conn.execute(insert(s.job_results).values(
            job_id="j1", incarnation=job.incarnation, run_id=job.run_id, config=job.config, variables=job.variables,
            status=status, cleanup="CLEAN", cleanup_due_at=now, cleanup_tries=0, next_cleanup_at=now,
            expires_at=now + 3600, created_at=now))


def _checkpoint(store, pipeline_id: int = 1) -> None:
    job = _job(store)
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=job.incarnation, checkpoint_id=1, pipeline_id=pipeline_id, batch_id=0,
            kind="CHECKPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"batch": 0}), fingerprint="f", attempt_id=1))


def _forget(store) -> None:
    with store.write() as conn:
        forget_job(conn, "j1", _job(store).incarnation)


@pytest.mark.parametrize("reuse", ["after cleanup", "after forget"])
def test_job_events_show_the_current_run_only(store, tmp_path, reuse):
    submit(store, tmp_path)
    _end(store)
    if reuse == "after forget":
        _forget(store)
    submit(store, tmp_path)
    run = _job(store).run_id
    with store.read() as conn:
        events = job_events(conn, "j1")
    assert [e["kind"] for e in events] == ["JOB_SUBMITTED"], events
    assert [e["run"] for e in events] == [run]


def test_a_forgotten_jobs_events_stay_with_their_run(store, tmp_path):
    submit(store, tmp_path)
    run = _job(store).run_id
    _end(store)
    _forget(store)
    with store.read() as conn:
        events = job_events(conn, "j1")
    assert [(e["kind"], e["run"]) for e in events] == [("JOB_SUBMITTED", run)]


def test_a_resume_reads_only_its_own_runs_checkpoints(store, tmp_path):
    """The old run checkpointed pipeline 1; the new run under the same id ended before its
    first checkpoint (no directory yet). Its resume must not look for a directory because of
    the old run's rows ("checkpoint directory missing")."""
    submit(store, tmp_path)
    _checkpoint(store)
    _end(store)
    submit(store, tmp_path)                      # incarnation 2, a run of its own
    _end(store, "FAILED")
    resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={})
    job = _job(store)
    assert (job.incarnation, job.status) == (3, "CREATED")
    assert json.loads(job.restore)["fresh"] == []


def test_a_resume_never_restores_an_earlier_runs_savepoint(store, tmp_path):
    from seatide.store.restore import RestoreRefused, savepoint_ids

    submit(store, tmp_path)
    job = _job(store)
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=job.incarnation, checkpoint_id=7, pipeline_id=0, batch_id=0, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": {}}}), fingerprint="f", attempt_id=1))
    _end(store)
    submit(store, tmp_path)
    _end(store)
    assert savepoint_ids(store, "j1") == []
    with pytest.raises(RestoreRefused, match="savepoint 7 was taken by an earlier run of job id j1, before it was "
                                             "submitted again"):
        resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={}, savepoint_id=7)


@pytest.mark.parametrize("event", ["DRIVER_LAUNCHING", "DRIVER_EXITED"])
def test_a_workers_event_about_an_earlier_runs_driver_is_that_runs(store, tmp_path, event):
    """Review 30, F7: the worker's events took the job's current run, so a driver of the run
    before, launched or reaped after the id was submitted again, showed in the new run's events."""
    from seatide.worker.agent import Worker

    submit(store, tmp_path)
    earlier = _job(store)
    with store.write() as conn:
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id="j1", incarnation=earlier.incarnation, number=1, worker_id="w", state="ASSIGNED", pid=1,
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
    _end(store)
    submit(store, tmp_path)             # the next run, while the earlier run's driver is still to be seen to
    worker = Worker(store, store.url, str(tmp_path), node_id="w")
    if event == "DRIVER_LAUNCHING":
        with store.read() as conn:
            assert worker.claim(conn.execute(select(s.attempts).where(s.attempts.c.attempt_id == attempt_id)).one())
    else:
        worker.record_exit(attempt_id, -9)
    with store.read() as conn:
        runs = [e.run_id for e in conn.execute(select(s.events).where(s.events.c.kind == event))]
        shown = [e["kind"] for e in job_events(conn, "j1")]
    assert runs == [earlier.run_id], f"{event} of the earlier run's driver was recorded for run {runs}"
    assert event not in shown, shown
    # the current run's driver: its own run
    current = _job(store)
    with store.write() as conn:
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id="j1", incarnation=current.incarnation, number=1, worker_id="w", state="RUNNING", pid=2,
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
    worker.record_exit(attempt_id, 0)
    with store.read() as conn:
        assert [e["run"] for e in job_events(conn, "j1") if e["kind"] == "DRIVER_EXITED"] == [current.run_id]
