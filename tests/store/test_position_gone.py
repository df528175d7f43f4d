"""A resume whose source position is gone from its server (a dropped replication slot, a purged
binlog file): a pipeline the resume would restore in place whose position is gone is a checkpoint
that cannot be used (store/restore.py ``check_positions``, coordinator/position_check.positions_gone):
refused before anything is recorded, or with ``--fallback fresh`` started over while the others
resume from their checkpoints.

What the servers say is stubbed here by the sources' answers; the real check against a real server
is tests/store/test_resume_refused_position_gone.py's, against stuck servers
tests/store/test_position_check_deadline.py's, end to end tests/databases/test_cdc_jobs.py's."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import resume_job
from seatide.store.unusable_checkpoints import PositionsAsked
from tests.store.test_store import JOB, _end, store, submit  # noqa: F401  (store is a fixture)

GONE = "replication slot 'seatide_j1_1_source0' no longer exists: submit it again"


TWO = """source { LocalFile { path = "/tmp/in1", file_format_type = "parquet", plugin_output = "a" } }
source { LocalFile { path = "/tmp/in2", file_format_type = "parquet", plugin_output = "b" } }
sink { Console { plugin_input = "a" } }
sink { Console { plugin_input = "b" } }
"""


def _resume(store, answer: dict[int, str], text: str = JOB, fallback: str | None = None) -> list:
    asked = []

    def positions_gone(job, plan, restored):
        asked.append([pipeline_id for pipeline_id, _, _ in restored])
        return PositionsAsked(answer)

    resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, fallback=fallback,
               check_positions=positions_gone)
    return asked


def _state(store):
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        pipelines = conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == "j1")).all()
    return job, pipelines


def test_a_resume_whose_position_is_gone_is_refused_and_records_nothing(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    with pytest.raises(RestoreRefused, match=f"cannot resume job j1: .*pipeline 1: {GONE}.*--fallback fresh"):
        _resume(store, {1: GONE})
    job, _ = _state(store)
    assert (job.incarnation, job.status) == (1, "CANCELED")          # no new incarnation


def test_a_resume_whose_position_is_there_starts_as_before(store, tmp_path):
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    assert _resume(store, {}) == [[1]]      # the pipeline restored in place is asked about
    job, _ = _state(store)
    assert (job.incarnation, job.status) == (2, "CREATED")


def test_fallback_fresh_starts_over_only_the_pipeline_whose_position_is_gone(store, tmp_path):
    submit(store, tmp_path, text=TWO)
    _end(store, "j1", "CANCELED", "CLEAN")
    assert _resume(store, {1: GONE}, TWO, fallback="fresh") == [[1, 2]]
    job, pipelines = _state(store)
    restore = json.loads(job.restore)
    assert (job.incarnation, job.status, restore["fallback"]) == (2, "CREATED", "fresh")
    assert restore["prepare"] == {"1": None}                         # pipeline 2 resumes in place
    assert [(e["pipeline"], e["problem"]) for e in restore["fresh"]] == [(1, GONE)]
    assert sorted(p.pipeline_id for p in pipelines if p.incarnation == 2) == [1, 2]
