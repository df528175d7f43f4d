"""A resume whose source position is gone from its server (a dropped replication slot, a purged
binlog file): refused before anything is recorded (store/restore.py ``check_positions``,
coordinator/source_watch.refuse_gone_positions).

What the servers say is stubbed here by the sources' answers; the real check against a real server
is tests/store/test_resume_refused_position_gone.py's, against stuck servers
tests/store/test_position_check_deadline.py's, end to end tests/databases/test_cdc_jobs.py's."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from seatide.config.loader import load_job_text
from seatide.coordinator import source_watch
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import resume_job
from tests.store.test_store import JOB, _end, store, submit  # noqa: F401  (store is a fixture)

GONE = "replication slot 'seatide_j1_1_source0' no longer exists: submit it again"


def _resume(store, monkeypatch, answer: dict[int, str]) -> list:
    asked = []

    def positions_gone(job, plan, restored):
        asked.append([pipeline_id for pipeline_id, _, _ in restored])
        return answer

    monkeypatch.setattr(source_watch, "positions_gone", positions_gone)
    resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={},
               check_positions=source_watch.refuse_gone_positions)
    return asked


def _state(store):
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        pipelines = conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == "j1")).all()
    return job, pipelines


def test_a_resume_whose_position_is_gone_is_refused_and_records_nothing(store, tmp_path, monkeypatch):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    with pytest.raises(RestoreRefused, match=f"cannot resume job j1: .*pipeline 1: {GONE}"):
        _resume(store, monkeypatch, {1: GONE})
    job, _ = _state(store)
    assert (job.incarnation, job.status) == (1, "CANCELED")          # no new incarnation


def test_a_resume_whose_position_is_there_starts_as_before(store, tmp_path, monkeypatch):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    assert _resume(store, monkeypatch, {}) == [[1]]      # the pipeline restored in place is asked about
    job, _ = _state(store)
    assert (job.incarnation, job.status) == (2, "CREATED")
