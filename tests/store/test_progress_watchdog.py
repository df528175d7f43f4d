"""The watchdog's stored facts: task progress from the driver, the HUNG flag, and migration 3."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import delete, inspect, select, text, update

from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import AttemptFenced, open_store
from seatide.store.migrations import current_revision, head
from seatide.store.views import job_info
from tests.store.older_lease import lease_as_before
from tests.store.test_store import _attempt, store, submit  # noqa: F401  (store is a fixture)

WATCHDOG_COLUMNS = {"jobs": ["progress_timeout_s", "on_hung", "hung_since"], "attempts": ["progress_at", "tasks_done"]}
# Added by later revisions (0006 liveness locks, 0008 checkpoint totals, 0009 job outline, 0010 newest
# checkpoint's facts, 0011 runs, 0012 source holds, 0013 events' runs, 0014 each pipeline's
# progress, 0018 a start's waiting note, 0021 node features): gone too in a store at 0003.
LATER_COLUMNS = {"leader_lease": ["liveness"], "nodes": ["liveness", "features"], "jobs": ["outline", "run_id", "release", "released_at"],
                 "job_results": ["run_id", "config", "variables"], "attempts": ["charged"],
                 "pipelines": ["checkpoints_completed", "checkpoints_failed", "last_checkpoint_id", "last_checkpoint_at",
                               "last_checkpoint_duration_ms", "last_checkpoint_rows", "progress_at",
                               "started_batch", "started_lineage", "waiting"],
                 "events": ["run_id"]}
LATER_INDEXES = ["ix_checkpoints_status", "ix_checkpoints_completed_at",      # 0005 scale indexes
                 "ix_checkpoints_savepoints",                               # 0008 checkpoint totals
                 "ix_jobs_release",                                         # 0012 source holds
                 "ix_events_kind"]                                          # 0019 events by kind
LATER_TABLES = ["sink_manifests", "source_holds", "left_held"]              # 0007 sink decisions, 0012, 0017


def test_task_progress_is_recorded_and_ends_the_hung_flag(store, tmp_path):
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    with store.write() as conn:
        conn.execute(update(s.jobs).values(status="RUNNING", hung_since=time.time() - 5))
    before = time.time()
    reporter.task_progress(12)
    with store.read() as conn:
        attempt = conn.execute(select(s.attempts)).one()
        assert attempt.tasks_done == 12 and attempt.progress_at >= before
        assert conn.execute(select(s.jobs.c.hung_since)).scalar() is None
        info = job_info(conn, "j1")
    assert info["currentAttempt"]["tasksCompleted"] == 12
    assert info["checkpoint"]["onHung"] == "restart"
    assert info["checkpoint"]["progressTimeoutSeconds"] == 600.0    # the 10 min default


def test_a_committed_batch_ends_the_hung_flag_too(store, tmp_path):
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    with store.write() as conn:
        conn.execute(update(s.jobs).values(status="RUNNING", hung_since=time.time() - 5))
    reporter.batch_committed(1, 0, 10, 5, None, "f")
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.hung_since)).scalar() is None


def test_progress_after_the_job_finished_is_taken_and_the_attempt_can_still_end(store, tmp_path):
    """Found in CI: the leader finished the job on its last pipeline's end, the driver's next
    progress sample was refused as late, and the driver exited fenced without recording
    that its attempt SUCCEEDED."""
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    with store.write() as conn:
        conn.execute(update(s.attempts).values(state="RUNNING"))
        conn.execute(update(s.jobs).values(status="FINISHED"))
    reporter.task_progress(7)
    reporter.end_attempt(succeeded=True)
    with store.read() as conn:
        attempt = conn.execute(select(s.attempts)).one()
    assert (attempt.tasks_done, attempt.state) == (7, "SUCCEEDED")


def test_a_replaced_attempt_cannot_report_progress(store, tmp_path):
    submit(store, tmp_path)
    old = _attempt(store, "j1")
    with store.write() as conn:
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == old).values(state="LOST"))
    _attempt(store, "j1", number=2)
    with pytest.raises(AttemptFenced):
        AttemptReporter(store, "j1", 1, old).task_progress(3)
    with store.read() as conn:
        assert [a.tasks_done for a in conn.execute(select(s.attempts))] == [None, None]


def test_a_store_before_the_watchdog_gains_its_columns_and_keeps_its_jobs(store, store_url, tmp_path):
    submit(store, tmp_path)
    with store.write() as conn:    # back to what revision 0003 made
        lease_as_before(conn)      # 0022 moved the lease (its liveness, from 0006, goes below)
        for index in LATER_INDEXES:    # first: SQLite drops no column an index names
            conn.execute(text(f"DROP INDEX {index}"))
        for table, columns in [*WATCHDOG_COLUMNS.items(), *LATER_COLUMNS.items()]:
            for column in columns:
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        for table in LATER_TABLES:
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0003'"))
    store.dispose()
    upgraded = open_store(store_url)
    with upgraded.read() as conn:
        assert current_revision(conn) == head()     # 0004 and every revision after it
        for table, columns in WATCHDOG_COLUMNS.items():
            assert set(columns) <= {c["name"] for c in inspect(conn).get_columns(table)}
        job = conn.execute(select(s.jobs)).one()
    # A job submitted before the upgrade keeps running as it did: no watchdog, the default policy.
    assert (job.job_id, job.status, job.progress_timeout_s, job.on_hung, job.hung_since) == (
        "j1", "CREATED", None, "restart", None)
    upgraded.dispose()


def test_a_pipeline_that_moves_ends_no_flag_another_pipeline_raised(store, tmp_path):
    """Issue 30, finding 10: the leader judges each pipeline, so a flag ends once every
    pipeline it judges has moved since, not at the first batch or task of any of them."""
    submit(store, tmp_path)
    reporter = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    with store.write() as conn:
        first = conn.execute(select(s.pipelines)).one()._asdict()
        conn.execute(s.pipelines.insert().values({**first, "pipeline_id": 2}))
        # each pipeline's own progress last seen 10 s ago (a driver reports every pipeline at its start)
        conn.execute(update(s.pipelines).values(status="RUNNING", idle=False, progress_at=time.time() - 10))
        conn.execute(update(s.jobs).values(status="RUNNING", hung_since=time.time() - 5, stale_since=time.time() - 5))
    reporter.task_progress(3, pipelines=[1])
    reporter.batch_committed(1, 0, 10, 5, None, "f")

    def flags():
        with store.read() as conn:
            return tuple(v is not None for v in conn.execute(select(s.jobs.c.hung_since, s.jobs.c.stale_since)).one())

    assert flags() == (True, True), "pipeline 1 ended the flags pipeline 2 raised"
    reporter.task_progress(4, pipelines=[2])
    assert flags() == (False, True)
    reporter.batch_committed(2, 0, 10, 5, None, "f")
    assert flags() == (False, False)
    with store.read() as conn:
        stamps = conn.execute(select(s.pipelines.c.progress_at).order_by(s.pipelines.c.pipeline_id)).scalars().all()
    assert all(stamps), stamps
