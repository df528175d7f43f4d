"""Outside review 3, F1 (failing on purpose): ``left_out`` and ``_plan_pipelines`` read different incarnations.

``left_out`` (store/restore.py) accepts a savepoint that does not hold a pipeline when that pipeline was
FINISHED in the *savepoint's* incarnation. ``_plan_pipelines`` decides "finished" from the *current*
incarnation's row. When the two differ (the pipeline FINISHED before the savepoint, then ran again
because its sources changed: ``resume --config changed.conf --fallback fresh``), ``--from`` that older
savepoint is accepted and plans a copy from ``savepoints/<id>/<pipeline>``, which that savepoint never
wrote: every attempt of the new incarnation fails in ``prepare_checkpoint``, and the next plain resume
finds the copy owed and refuses (``_never_held`` only forgives pipelines ``left_out`` names), so only
``--fallback fresh`` goes on. The promise: such a resume is refused with a clear message, or accepted
with a plan that can run. State as the driver and leader leave it; no driver runs.
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


def _committed(store, plan, pipeline_id, directory, batch, checkpoint_id, incarnation):
    fingerprint = plan.pipeline(pipeline_id).fingerprint()
    os.makedirs(os.path.join(directory, "spark", "offsets"), exist_ok=True)
    for b in range(batch + 1):
        with open(os.path.join(directory, "spark", "offsets", str(b)), "w") as handle:
            handle.write(f"v1\n{{}}\n{{\"batch\": {b}}}\n")
    meta_path = os.path.join(directory, "seatide.json")
    lineage = json.load(open(meta_path)).get("lineage") if os.path.exists(meta_path) else f"l{pipeline_id}"
    write_json_atomic(meta_path, {"lineage": lineage or f"l{pipeline_id}", "fingerprint": fingerprint,
                                  "micro_batch": True})
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=incarnation, checkpoint_id=checkpoint_id, pipeline_id=pipeline_id,
            batch_id=batch, kind="CHECKPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=300,
            source_offsets=json.dumps({"batch": batch}), fingerprint=fingerprint, attempt_id=incarnation))
        conn.execute(update(s.pipelines).where(
            s.pipelines.c.job_id == "j1", s.pipelines.c.pipeline_id == pipeline_id,
            s.pipelines.c.incarnation == incarnation).values(last_batch_id=batch))


def test_from_an_older_savepoint_a_pipeline_finished_then_rerun_is_refused_or_runs(store, tmp_path):
    text = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(text))
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir)).all())
    # Incarnation 1: pipeline 2 read all its 900 rows and FINISHED; pipeline 1 at batch 1 when the job
    # is stopped with savepoint 4, which holds pipeline 1 only (pipeline 2 had finished: not left out).
    _committed(store, plan, 1, dirs[1], batch=1, checkpoint_id=1, incarnation=1)
    _committed(store, plan, 2, dirs[2], batch=2, checkpoint_id=2, incarnation=1)
    shutil.copytree(dirs[1], savepoint_dir(dirs[1], 4))
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=4, pipeline_id=0, batch_id=1, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 1}}), fingerprint="", attempt_id=1))
        for pid, status in ((1, "SAVEPOINT_DONE"), (2, "FINISHED")):
            conn.execute(update(s.pipelines).where(s.pipelines.c.pipeline_id == pid).values(status=status))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="SAVEPOINT_DONE",
                                                                          desired="SAVEPOINT"))
    # Pipeline 2's sources change (docs/operations.md: a FINISHED pipeline whose sources changed runs
    # again): `seatide resume j1 --config changed.conf --fallback fresh` -> incarnation 2.
    head, sep, tail = text.rpartition("split.num = 4")
    changed = head + "split.num = 2" + tail
    plan2 = build_plan(load_job_text(changed))
    assert plan2.pipeline(1).fingerprint() == plan.pipeline(1).fingerprint()
    assert plan2.pipeline(2).fingerprint() != plan.pipeline(2).fingerprint()
    resume_job(store, "j1", plan=plan2, text=changed, variables={}, fallback="fresh")
    # Its driver starts pipeline 2 over and commits a batch; then the job is cancelled.
    assert prepare_checkpoint(dirs[2], 2, None, 2, time.time) is not None
    _committed(store, plan2, 2, dirs[2], batch=0, checkpoint_id=5, incarnation=2)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.incarnation == 2).values(status="CANCELED"))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="CANCELED", desired="CANCEL"))

    # `seatide resume j1 --from 4 --config changed.conf`
    try:
        resume_job(store, "j1", plan=plan2, text=changed, variables={}, savepoint_id=4)
    except RestoreRefused:
        return                                   # refused with a message: the promise kept
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).first()
    prepare = json.loads(job.restore)["prepare"]
    never_written = {pid: src for pid, src in prepare.items() if src is not None and not os.path.isdir(src)}
    # Accepted, so it must be runnable: every directory it plans to copy in must exist.
    plain = None
    if never_written:
        with pytest.raises(FileNotFoundError):             # what every attempt of incarnation 3 does
            prepare_checkpoint(dirs[2], 3, prepare["2"], 3, time.time)
        with store.write() as conn:
            conn.execute(update(s.pipelines).where(s.pipelines.c.incarnation == 3).values(status="FAILED"))
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FAILED"))
        try:
            resume_job(store, "j1", plan=plan2, text=changed, variables={})
            plain = "accepted"
        except RestoreRefused as exc:
            plain = f"refused: {exc}"
    assert never_written == {}, (
        f"--from 4 was accepted and plans copies from directories savepoint 4 never wrote: {never_written}; "
        f"every attempt fails in prepare_checkpoint; the next plain resume was {plain}")
