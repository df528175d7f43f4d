"""A pipeline a resume's config adds to the job (``seatide resume JOB --config more.conf``).

Found by outside review 3 (F2): the resume recorded it with ``checkpoint_dir = ""``; its driver's
``prepare_checkpoint("")`` failed on every attempt, the next plain resume refused it as a directory "not
visible from here", and ``--fallback fresh`` recorded "" again: the job never ran the new pipeline.

The promise (store/restore.py ``_added``): it starts from nothing, as a new operator restored from a Flink
savepoint that holds no state for it does, in a directory of its own beside the others' (as a submission
makes them), with or without ``--fallback fresh``, and the answer says so. One the run had before (a
resume's config left it out since) committed rows then: starting it over is the fallback's to decide.
State as the resume leaves it; no driver runs (tests/e2e/test_resume_added_pipeline.py runs one).
"""

from __future__ import annotations

import json
import os
import time

import pytest
from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.store import schema as s
from seatide.store.restore import RestoreRefused, resume_job
from seatide.testing.jobs import batch_job
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only

NEW = "pipeline 2: it is new (the job had no such pipeline): it starts from nothing, as at a submission"


def _cancelled(store):
    with store.write() as conn:
        conn.execute(update(s.pipelines).values(status="CANCELED"))
        conn.execute(update(s.jobs).values(status="CANCELED", desired="CANCEL"))


def _planned(store, incarnation: int) -> tuple[dict, dict]:
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).first()
        rows = {r.pipeline_id: r for r in conn.execute(select(s.pipelines).where(
            s.pipelines.c.incarnation == incarnation))}
    return json.loads(job.restore), rows


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_a_pipeline_added_by_a_resume_starts_from_nothing_in_a_directory_of_its_own(store, tmp_path, fallback):
    one = batch_job(str(tmp_path / "out"), rows=900, pipelines=1, rows_per_batch=300)
    submit(store, tmp_path, text=one)
    _cancelled(store)
    two = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    answer = resume_job(store, "j1", plan=build_plan(load_job_text(two)), text=two, variables={}, fallback=fallback)
    assert answer == [NEW]
    restore, rows = _planned(store, 2)
    added = rows[2].checkpoint_dir
    assert added == os.path.join(os.path.dirname(rows[1].checkpoint_dir), "2")      # beside pipeline 1's
    assert restore["prepare"] == {} and restore["fresh"] == [] and rows[2].last_batch_id is None
    assert prepare_checkpoint(added, 2, None, 1, time.time) is not None    # a driver could, though none must


def test_a_job_an_earlier_version_gave_an_empty_directory_resumes_plainly_and_runs_it(store, tmp_path):
    one = batch_job(str(tmp_path / "out"), rows=900, pipelines=1, rows_per_batch=300)
    two = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(two))
    submit(store, tmp_path, text=one)
    with store.write() as conn:           # what `resume --config two --fallback fresh` recorded before the fix
        conn.execute(update(s.jobs).values(incarnation=2, status="FAILED", desired="RUN", config=two, restore=json.dumps(
            {"from": "j1@1", "fallback": "fresh", "fresh": [{"pipeline": 2, "problem": "it is new"}],
             "prepare": {"2": None}, "carried": [], "release_incarnation": None})))
        directory = conn.execute(select(s.pipelines.c.checkpoint_dir)).scalar()
        for pid, path in ((1, directory), (2, "")):
            conn.execute(insert(s.pipelines).values(
                job_id="j1", incarnation=2, pipeline_id=pid, status="FAILED", checkpoint_dir=path,
                fingerprint=plan.pipeline(pid).fingerprint(), rows_read=0, rows_written=0, idle=False))
    assert resume_job(store, "j1", plan=plan, text=two, variables={}) == [NEW]
    restore, rows = _planned(store, 3)
    assert rows[2].checkpoint_dir == os.path.join(os.path.dirname(directory), "2") and restore["prepare"] == {}


def test_a_pipeline_the_run_had_before_is_started_over_only_by_the_fallback(store, tmp_path):
    two = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(two))
    submit(store, tmp_path, text=two)
    with store.write() as conn:          # incarnation 2 (`--config one.conf --fallback fresh`) left pipeline 2 out
        conn.execute(update(s.jobs).values(incarnation=2, status="CANCELED", desired="CANCEL"))
        row = conn.execute(select(s.pipelines).where(s.pipelines.c.pipeline_id == 1)).first()
        conn.execute(insert(s.pipelines).values(
            job_id="j1", incarnation=2, pipeline_id=1, status="CANCELED", checkpoint_dir=row.checkpoint_dir,
            fingerprint=row.fingerprint, rows_read=0, rows_written=0, idle=False))
    with pytest.raises(RestoreRefused) as refused:
        resume_job(store, "j1", plan=plan, text=two, variables={})
    assert ("pipeline 2: the job had it until incarnation 1 (a resume's config left it out since): started from "
            "nothing, it would write again the rows it committed then") in str(refused.value)
    resume_job(store, "j1", plan=plan, text=two, variables={}, fallback="fresh")
    restore, rows = _planned(store, 3)
    assert restore["prepare"] == {"2": None} and [e["pipeline"] for e in restore["fresh"]] == [2]
    assert rows[2].checkpoint_dir.endswith("/2") and rows[2].checkpoint_dir == \
        os.path.join(os.path.dirname(rows[1].checkpoint_dir), "2")
