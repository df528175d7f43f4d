"""Outside review 1 (wt/review1), finding F1: a savepoint that does not hold an unfinished pipeline.

``store/restore.py`` (``_plan_pipelines``) assumes "a pipeline the savepoint does not hold had finished
before it was taken". It need not have: while a stop with a savepoint waits for each pipeline's running
batch (``runtime/driver.py``, ``_supervise``), one pipeline's batch may fail permanently (bad data):
that pipeline ends FAILED, the others SAVEPOINT_DONE, and ``_take_savepoint`` copies only those. The
job ends FAILED with the savepoint listed. A resume from it then plans, for the FAILED pipeline, a copy
of ``savepoints/<id>/<pipeline>``, which was never written: ``inspect_checkpoint`` accepts a missing
directory for a pipeline the savepoint does not hold, so the resume is accepted, and every attempt of
the new incarnation fails in ``checkpoint_move.prepare_checkpoint`` (FileNotFoundError); the next plain
resume then finds an owed copy from a missing directory and only ``--fallback fresh`` goes on: the
pipeline's own checkpoint in place (batches 0-1 committed) is never restored.

The state is what the driver and the leader leave (directories, checkpoint and savepoint rows,
statuses); no driver runs. SQLite only: the store mechanism is not the subject.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from sqlalchemy import insert, select, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.restore import RestoreRefused, resume_job, savepoint_dir
from seatide.testing.jobs import batch_job
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _committed(store, plan, pipeline_id: int, directory: str, batch: int, checkpoint_id: int) -> None:
    """What a micro-batch driver leaves after committing ``batch``: metadata, Spark's plan, a checkpoint row."""
    fingerprint = plan.pipeline(pipeline_id).fingerprint()
    os.makedirs(os.path.join(directory, "spark", "offsets"), exist_ok=True)
    for b in range(batch + 1):
        with open(os.path.join(directory, "spark", "offsets", str(b)), "w") as handle:
            handle.write(f"v1\n{{}}\n{{\"batch\": {b}}}\n")
    write_json_atomic(os.path.join(directory, "seatide.json"),
                      {"lineage": f"l{pipeline_id}", "fingerprint": fingerprint, "micro_batch": True})
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=checkpoint_id, pipeline_id=pipeline_id, batch_id=batch,
            kind="CHECKPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=300,
            source_offsets=json.dumps({"batch": batch}), fingerprint=fingerprint, attempt_id=1))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1", s.pipelines.c.pipeline_id == pipeline_id)
                     .values(last_batch_id=batch))


def test_a_savepoint_without_a_failed_pipeline_is_not_resumed_from_a_directory_never_written(store, tmp_path):
    text = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(text))
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir)).all())
    _committed(store, plan, 1, dirs[1], batch=1, checkpoint_id=1)
    _committed(store, plan, 2, dirs[2], batch=1, checkpoint_id=2)
    # The stop with a savepoint: pipeline 1 stopped after batch 1 and is copied; pipeline 2's batch 2
    # failed permanently meanwhile (FAILED), so _take_savepoint copied pipeline 1 only.
    shutil.copytree(dirs[1], savepoint_dir(dirs[1], 3))
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=3, pipeline_id=0, batch_id=1, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 1}}), fingerprint="", attempt_id=1))
        for pipeline_id, status in ((1, "SAVEPOINT_DONE"), (2, "FAILED")):
            conn.execute(update(s.pipelines).where(s.pipelines.c.pipeline_id == pipeline_id).values(status=status))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FAILED", desired="SAVEPOINT"))
    assert not os.path.exists(savepoint_dir(dirs[2], 3))

    try:
        resume_job(store, "j1", plan=plan, text=text, variables={}, savepoint_id=3)
    except RestoreRefused as refused:       # a refusal naming pipeline 2 would be a sound answer
        assert "pipeline 2" in str(refused), refused
        return
    with store.read() as conn:
        prepare = json.loads(conn.execute(select(s.jobs.c.restore)).scalar())["prepare"]
    source = prepare.get("2")
    if source is None or os.path.isdir(source):
        return      # pipeline 2 kept (or restored from) a checkpoint that exists: sound
    try:
        prepare_checkpoint(dirs[2], 2, source, 1, time.time)
        moved = "moved"
    except OSError as exc:
        moved = f"{type(exc).__name__}: {exc}"
    # the new incarnation fails (its retries spent on that error); the next plain resume:
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FAILED", desired="RUN"))
    try:
        resume_job(store, "j1", plan=plan, text=text, variables={})
        then = "accepted"
    except RestoreRefused as refused:
        then = f"refused: {refused}"
    pytest.fail(f"resume from savepoint 3 accepted; pipeline 2 (FAILED, not in the savepoint, its own checkpoint "
                f"at batch 1 in place) is to be copied from {source}, which does not exist; the new "
                f"incarnation's driver, on every attempt: {moved}. The next plain resume: {then}")
