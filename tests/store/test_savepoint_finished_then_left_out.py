"""``--from`` a savepoint that left out a pipeline FINISHED when it was taken keeps it FINISHED
(store/savepoint_scope.py; docs/operations.md), also when an incarnation since ran without it (a
resume's config left it out, with --fallback fresh): it is decided from its row in the savepoint's
incarnation, never taken for a pipeline the resume adds, whose way on (--fallback fresh) would write
its 900 rows a second time (outside review 4, F4)."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.restore import RestoreRefused, resume_job
from seatide.testing.jobs import batch_job
from tests.store.test_savepoint_finished_then_rerun import _rerun_since_savepoint
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_from_a_savepoint_a_pipeline_finished_then_and_left_out_since_stays_finished(store, tmp_path):
    text, _, _, dirs = _rerun_since_savepoint(store, tmp_path, rerun=False)
    # Incarnation 2 without pipeline 2 (its config left it out: refused as missing, so --fallback fresh)
    alone = batch_job(str(tmp_path / "out"), rows=900, pipelines=1, rows_per_batch=300)
    plan1 = build_plan(load_job_text(alone))
    assert plan1.pipeline(1).fingerprint() == build_plan(load_job_text(text)).pipeline(1).fingerprint()
    resume_job(store, "j1", plan=plan1, text=alone, variables={}, fallback="fresh")
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.incarnation == 2).values(status="CANCELED"))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="CANCELED", desired="CANCEL"))
    # Back to savepoint 4 with the config it was taken with: pipeline 2 FINISHED then, its 900 rows in.
    try:
        resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, savepoint_id=4)
    except RestoreRefused as refused:
        raise AssertionError(f"--from 4 refused for a pipeline FINISHED at savepoint 4: {refused}") from None
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).first()
        status = conn.execute(select(s.pipelines.c.status).where(
            s.pipelines.c.incarnation == job.incarnation, s.pipelines.c.pipeline_id == 2)).scalar()
    assert status == "FINISHED" and "2" not in json.loads(job.restore)["prepare"], (status, job.restore)
