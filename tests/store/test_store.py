"""The state store on SQLite and PostgreSQL: migrations, submissions, and the driver fence."""

from __future__ import annotations

import os
import time

import pytest
from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.coordinator.lease import LeaderLease
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import AttemptFenced, open_store
from seatide.store.job_ids import JobRefused
from seatide.store.jobs import request_stop, submit_job
from seatide.store.migrations import ALEMBIC_MANAGED, current_revision, head
from seatide.store.views import job_rows

JOB = """
source { LocalFile { path = "/tmp/in", file_format_type = "parquet" } }
sink { Console {} }
"""


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def submit(store, tmp_path, job_id="j1", text=JOB):
    config = load_job_text(text)
    return submit_job(store, text=text, variables={}, config=config, plan=build_plan(config),
                      outline=outline_json(config), data_dir=str(tmp_path), job_id=job_id)


def test_migrations_apply_once_and_record_their_version(store, store_url):
    again = open_store(store_url)     # a second opener finds the schema current
    with again.read() as conn:
        assert current_revision(conn) == head()
        assert conn.execute(select(s.schema_version)).all()[-1].version == ALEMBIC_MANAGED
        assert len(conn.execute(select(s.leadership)).all()) == 1
    again.dispose()


def test_submission_records_job_and_pipelines(store, tmp_path):
    submit(store, tmp_path)
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
        pipes = conn.execute(select(s.pipelines)).all()
        events = [e.kind for e in conn.execute(select(s.events).where(s.events.c.job_id == "j1"))]
    assert (job.status, job.desired, job.incarnation, job.max_retries) == ("CREATED", "RUN", 1, 3)
    assert [(p.pipeline_id, p.status) for p in pipes] == [(1, "CREATED")]
    assert pipes[0].checkpoint_dir.endswith(f"checkpoints/j1/{job.run_id}/1")   # the run's own directory
    assert events == ["JOB_SUBMITTED"]


def _end(store, job_id: str, status: str, cleanup: str) -> None:
    now = time.time()
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(status=status, finished_at=now))
        conn.execute(insert(s.job_results).values(job_id=job_id, incarnation=1, status=status, cleanup=cleanup,
                                                  cleanup_due_at=now + 60, cleanup_tries=0, next_cleanup_at=now + 60,
                                                  expires_at=now + 3600, created_at=now))


def test_job_id_reuse_is_refused_while_running_or_cleanup_is_pending(store, tmp_path):
    submit(store, tmp_path)
    with pytest.raises(JobRefused, match="already CREATED"):
        submit(store, tmp_path)
    _end(store, "j1", "FINISHED", "DIRTY")
    with pytest.raises(JobRefused, match="cleanup is still pending"):
        submit(store, tmp_path)
    with store.write() as conn:
        conn.execute(update(s.job_results).values(cleanup="CLEAN"))
    submit(store, tmp_path)
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.incarnation)).scalar() == 2


def test_a_reused_job_id_starts_in_checkpoint_directories_of_its_own(store, tmp_path):
    """A stopped run keeps its checkpoints for a resume; a new run under its id must not
    restore them: it is a new job that happens to have the same name."""
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    submit(store, tmp_path)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.incarnation, s.pipelines.c.checkpoint_dir)).all())
    assert dirs[1] != dirs[2]
    # One job root, a directory per run within it: each run's expiry removes its own.
    assert os.path.dirname(os.path.dirname(dirs[1])) == os.path.dirname(os.path.dirname(dirs[2]))
    assert os.path.dirname(dirs[1]) != os.path.dirname(dirs[2])


def test_stop_requests_are_refused_for_ended_or_unknown_jobs(store, tmp_path):
    submit(store, tmp_path)
    assert request_stop(store, "j1") == "CREATED"
    with pytest.raises(JobRefused, match="no job"):
        request_stop(store, "nope")
    _end(store, "j1", "CANCELED", "DIRTY")
    with pytest.raises(JobRefused, match="already ended"):
        request_stop(store, "j1")


def _attempt(store, job_id: str, state: str = "RUNNING", number: int = 1) -> int:
    with store.write() as conn:
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id=job_id, incarnation=1, number=number, worker_id="w", state=state, created_at=time.time(),
            kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(current_attempt=attempt_id))
    return attempt_id


def test_a_driver_whose_attempt_was_replaced_cannot_write(store, tmp_path):
    submit(store, tmp_path)
    old = _attempt(store, "j1")
    reporter = AttemptReporter(store, "j1", 1, old)
    assert reporter.batch_committed(1, 0, 10, 5, None, "f") == 1
    with store.write() as conn:
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == old).values(state="LOST"))
    _attempt(store, "j1", number=2)
    for write in (lambda: reporter.heartbeat(), lambda: reporter.batch_committed(1, 1, 10, 5, None, "f"),
                  lambda: reporter.pipeline_status(1, "FINISHED"), lambda: reporter.batch_started(1, 1, "l1")):
        with pytest.raises(AttemptFenced):
            write()
    with store.read() as conn:
        assert len(conn.execute(select(s.checkpoints)).all()) == 1
        assert conn.execute(select(s.pipelines.c.status, s.pipelines.c.started_batch)).one() == ("CREATED", None)


def test_late_reports_about_an_ended_job_are_dropped(store, tmp_path):
    submit(store, tmp_path)
    attempt = _attempt(store, "j1")
    reporter = AttemptReporter(store, "j1", 1, attempt)
    _end(store, "j1", "CANCELED", "DIRTY")
    with pytest.raises(AttemptFenced, match="late report"):
        reporter.batch_committed(1, 0, 10, 5, None, "f")
    assert reporter.heartbeat() == "RUN"      # the driver may still learn it should stop
    reporter.end_attempt(succeeded=True)       # and record its own end
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.status)).scalar() == "CANCELED"
        assert conn.execute(select(s.checkpoints)).all() == []


def test_leader_writes_carry_their_epoch_in_the_event_log(store):
    lease = LeaderLease(store, "c", None)
    assert lease.tick()
    with store.read() as conn:
        event = conn.execute(select(s.events).where(s.events.c.kind == "LEADER_ELECTED")).one()
    assert event.epoch == lease.epoch == 1


def test_a_committed_checkpoint_is_the_pipelines_newest_with_its_duration_and_rows(store, tmp_path):
    """The list reads a job's newest checkpoint from its pipeline rows (revision 0010): the
    driver's commit keeps them there, and the one-job view agrees with the checkpoint rows."""
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    with store.write() as conn:
        conn.execute(update(s.jobs).values(status="RUNNING"))
    reporter.batch_committed(1, 0, 10, 5, None, "f")
    reporter.batch_committed(1, 1, 17, 23, None, "f")
    with store.read() as conn:
        pipeline = conn.execute(select(s.pipelines).where(s.pipelines.c.pipeline_id == 1)).one()
        newest = conn.execute(select(s.checkpoints).order_by(s.checkpoints.c.checkpoint_id.desc())).first()
        summary = job_rows(conn)[0]["checkpoint"]
    assert (pipeline.last_checkpoint_id, pipeline.last_checkpoint_duration_ms, pipeline.last_checkpoint_rows) == \
        (newest.checkpoint_id, 23, 17)
    assert (summary["lastCheckpointId"], summary["lastCheckpointDurationMs"], summary["lastCheckpointRows"],
            summary["completed"]) == (2, 23, 17, 2)
