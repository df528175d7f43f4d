"""Outside review 3, F2 (failing on purpose; older than the change under review, found beside it).

A resume whose config adds a pipeline (``resume --config more.conf --fallback fresh``: "it is new: the
job had no such pipeline", store/restore.py ``_plan_pipelines``) records the new pipeline with
``checkpoint_dir = ""``. Its driver's ``prepare_checkpoint("")`` then fails on every attempt (the move
lock's directory is ``os.path.dirname("")``), and the next plain resume refuses it as a directory
"not visible from here"; ``--fallback fresh`` records "" again. The job never runs the new pipeline,
and the pipelines it had can go on only without it. State as the resume leaves it; no driver runs.
"""

from __future__ import annotations

import time

from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.store import schema as s
from seatide.store.restore import resume_job
from seatide.testing.jobs import batch_job
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_a_pipeline_added_by_a_resume_gets_a_checkpoint_directory_its_driver_can_prepare(store, tmp_path):
    one = batch_job(str(tmp_path / "out"), rows=900, pipelines=1, rows_per_batch=300)
    submit(store, tmp_path, text=one)
    with store.write() as conn:
        conn.execute(update(s.pipelines).values(status="CANCELED"))
        conn.execute(update(s.jobs).values(status="CANCELED", desired="CANCEL"))
    two = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    resume_job(store, "j1", plan=build_plan(load_job_text(two)), text=two, variables={}, fallback="fresh")
    with store.read() as conn:
        added = conn.execute(select(s.pipelines.c.checkpoint_dir).where(
            s.pipelines.c.incarnation == 2, s.pipelines.c.pipeline_id == 2)).scalar()
    try:
        prepare_checkpoint(added, 2, None, 1, time.time)       # what incarnation 2's driver does first
        prepared = "prepared"
    except OSError as exc:
        prepared = f"{type(exc).__name__}: {exc}"
    assert added, f"pipeline 2's checkpoint_dir is {added!r}; its driver's prepare_checkpoint: {prepared}"
