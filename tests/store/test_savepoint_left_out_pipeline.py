"""A savepoint that leaves out a pipeline that had not finished is no savepoint of the job (outside review 1, F1).

While a stop with a savepoint waits for each pipeline's running batch (``runtime/driver.py``, ``_supervise``),
one pipeline's batch may fail permanently (bad data): it ends FAILED, the others SAVEPOINT_DONE, and
``_take_savepoint`` copies only those. A resume from that savepoint used to plan the FAILED pipeline's copy
from ``savepoints/<id>/<pipeline>``, never written: every attempt of the new incarnation failed to copy it,
and the next plain resume found that copy owed, so only ``--fallback fresh`` went on (its batches written
again). A savepoint is all or nothing (``store/savepoint_scope.py``, ``left_out``): ``--from`` it is refused, naming
the pipeline and the way on, it is not listed, and a plain resume restores every pipeline from its own
checkpoint. A job already stuck (resumed from such a savepoint before) resumes plainly too.

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
from seatide.store.restore import RestoreRefused, resume_job, savepoint_dir, savepoint_ids
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


@pytest.fixture
def stopped(store, tmp_path):
    """Job j1 (two pipelines of 900 rows, 300 a batch), both at batch 1, stopped with savepoint 3 while
    pipeline 2's batch 2 failed permanently: savepoint 3 holds pipeline 1 only; the job ended FAILED."""
    text = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(text))
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir)).all())
    _committed(store, plan, 1, dirs[1], batch=1, checkpoint_id=1)
    _committed(store, plan, 2, dirs[2], batch=1, checkpoint_id=2)
    stopped_with_savepoint(store, dirs[1], 3, {1: "SAVEPOINT_DONE", 2: "FAILED"}, job_status="FAILED")
    return text, plan, dirs


def stopped_with_savepoint(store, directory: str, checkpoint_id: int, statuses: dict[int, str],
                           job_status: str) -> None:
    """Job j1 stopped with savepoint ``checkpoint_id`` of incarnation 1, which holds pipeline 1 at batch 1
    only (its directory copied), the pipelines and the job left as ``statuses`` and ``job_status`` say."""
    shutil.copytree(directory, savepoint_dir(directory, checkpoint_id))
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=checkpoint_id, pipeline_id=0, batch_id=1, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 1}}), fingerprint="", attempt_id=1))
        for pipeline_id, status in statuses.items():
            conn.execute(update(s.pipelines).where(s.pipelines.c.pipeline_id == pipeline_id).values(status=status))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status=job_status, desired="SAVEPOINT"))


def _restored_in_place(store) -> dict[int, int]:
    """The new incarnation's plan: no directory to move, and each pipeline's batch to go on after."""
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).first()
        rows = conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.last_batch_id).where(
            s.pipelines.c.incarnation == job.incarnation)).all()
    assert json.loads(job.restore)["prepare"] == {} and json.loads(job.restore)["fresh"] == []
    return dict(rows)


def test_a_savepoint_without_an_unfinished_pipeline_is_refused_and_a_plain_resume_restores_each(store, stopped):
    text, plan, dirs = stopped
    with pytest.raises(RestoreRefused) as refused:
        resume_job(store, "j1", plan=plan, text=text, variables={}, savepoint_id=3)
    assert "does not hold pipeline 2, which had not finished" in str(refused.value)
    assert "Resume without --from (`seatide resume j1`)" in str(refused.value)
    assert savepoint_ids(store, "j1") == []          # not offered as a savepoint of the job
    # both go on after batch 1, from their own checkpoints: rows 600-899 next, none again, none lost
    assert resume_job(store, "j1", plan=plan, text=text, variables={}) == []
    assert _restored_in_place(store) == {1: 1, 2: 1}


def accepted_before(store, plan, dirs: dict, incarnation: int, savepoint_id: int) -> dict[str, str]:
    """What an earlier version's resume ``--from`` the savepoint recorded: ``incarnation`` copies
    savepoints/<id>/<pipeline> in for every pipeline, ended FAILED (pipeline 1 at batch 1). The copies."""
    copies = {str(pid): savepoint_dir(d, savepoint_id) for pid, d in dirs.items()}
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(
            incarnation=incarnation, status="FAILED", desired="RUN", restored_from=f"savepoint {savepoint_id}",
            restore=json.dumps({"from": f"savepoint {savepoint_id}", "fallback": "fail", "fresh": [],
                                "prepare": copies, "carried": [], "release_incarnation": None})))
        for pid, batch in ((1, 1), (2, None)):
            conn.execute(insert(s.pipelines).values(
                job_id="j1", incarnation=incarnation, pipeline_id=pid, status="FAILED", checkpoint_dir=dirs[pid],
                fingerprint=plan.pipeline(pid).fingerprint(), rows_read=0, rows_written=0, idle=False,
                last_batch_id=batch))
    return copies


def test_a_job_resumed_from_such_a_savepoint_before_resumes_from_the_checkpoint_in_place(store, stopped, tmp_path):
    text, plan, dirs = stopped
    # What a resume from savepoint 3 decided before it was refused: incarnation 2 copies savepoints/3/<p> in.
    copies = accepted_before(store, plan, dirs, 2, 3)
    # Its driver, on every attempt: pipeline 1's copy is made, pipeline 2's cannot be.
    assert prepare_checkpoint(dirs[1], 2, copies["1"], 1, time.time) is not None
    with pytest.raises(FileNotFoundError):
        prepare_checkpoint(dirs[2], 2, copies["2"], 1, time.time)
    answer = resume_job(store, "j1", plan=plan, text=text, variables={})
    assert answer == ["pipeline 2: incarnation 2 was to restore it from savepoint 3, which does not hold it (it had "
                      "not finished when that savepoint was taken, or it ran again after it had), and never could; it was re-planned from its "
                      "directory: it is restored from the checkpoint in place"]
    assert _restored_in_place(store) == {1: 1, 2: 1}
