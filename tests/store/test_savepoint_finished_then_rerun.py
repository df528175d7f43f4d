"""``--from`` a savepoint that left out a pipeline FINISHED when it was taken, which ran again since.

Found by outside review 3 (F1): ``left_out`` accepts a savepoint that does not hold a pipeline FINISHED in
the *savepoint's* incarnation, and ``_plan_pipelines`` then decided from the *current* incarnation, where
that pipeline had run again (``resume --config changed.conf --fallback fresh``): ``--from`` the older
savepoint was accepted and planned a copy from ``savepoints/<id>/<pipeline>``, which that savepoint never
wrote; every attempt failed, and the next plain resume refused the owed copy.

The promise (store/savepoint_scope.py): a pipeline the savepoint does not hold is decided from the
savepoint's incarnation and never copied. With the sources it had then it stays FINISHED (the job rewound to
that point, as Flink restores a finished task); with changed sources it must run again from nothing, so
``--from`` is refused naming it and the plain resume, which goes on from the rerun's own checkpoint (or
``--fallback fresh`` starts it over, explicitly). A job an earlier version accepted that way resumes plainly.
State as the driver and leader leave it; no driver runs.
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
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.restore import RestoreRefused, resume_job, savepoint_dir
from seatide.testing.jobs import batch_job
from tests.store.test_savepoint_left_out_pipeline import accepted_before, stopped_with_savepoint
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


def _rerun_since_savepoint(store, tmp_path, rerun: bool = True):
    text = batch_job(str(tmp_path / "out"), rows=900, pipelines=2, rows_per_batch=300)
    plan = build_plan(load_job_text(text))
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        dirs = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir)).all())
    # Incarnation 1: pipeline 2 read all its 900 rows and FINISHED; pipeline 1 at batch 1 when the job
    # is stopped with savepoint 4, which holds pipeline 1 only (pipeline 2 had finished: not left out).
    _committed(store, plan, 1, dirs[1], batch=1, checkpoint_id=1, incarnation=1)
    _committed(store, plan, 2, dirs[2], batch=2, checkpoint_id=2, incarnation=1)
    stopped_with_savepoint(store, dirs[1], 4, {1: "SAVEPOINT_DONE", 2: "FINISHED"}, job_status="SAVEPOINT_DONE")
    # Pipeline 2's sources change (docs/operations.md: a FINISHED pipeline whose sources changed runs
    # again): `seatide resume j1 --config changed.conf --fallback fresh` -> incarnation 2.
    head, sep, tail = text.rpartition("split.num = 4")
    changed = head + "split.num = 2" + tail
    plan2 = build_plan(load_job_text(changed))
    assert plan2.pipeline(1).fingerprint() == plan.pipeline(1).fingerprint()
    assert plan2.pipeline(2).fingerprint() != plan.pipeline(2).fingerprint()
    if not rerun:
        return text, changed, plan2, dirs
    resume_job(store, "j1", plan=plan2, text=changed, variables={}, fallback="fresh")
    # Its driver starts pipeline 2 over and commits a batch; then the job is cancelled.
    assert prepare_checkpoint(dirs[2], 2, None, 2, time.time) is not None
    _committed(store, plan2, 2, dirs[2], batch=0, checkpoint_id=5, incarnation=2)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.incarnation == 2).values(status="CANCELED"))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="CANCELED", desired="CANCEL"))

    return text, changed, plan2, dirs


@pytest.fixture
def rerun(store, tmp_path):
    return _rerun_since_savepoint(store, tmp_path)


def _restore(store) -> tuple[dict, dict]:
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).first()
        rows = dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.last_batch_id).where(
            s.pipelines.c.incarnation == job.incarnation)).all())
    return json.loads(job.restore), rows


def test_from_an_older_savepoint_a_pipeline_finished_then_rerun_on_changed_sources_is_refused_naming_it(
        store, rerun):
    text, changed, plan2, dirs = rerun
    with pytest.raises(RestoreRefused) as refused:
        resume_job(store, "j1", plan=plan2, text=changed, variables={}, savepoint_id=4)
    message = str(refused.value)
    assert "pipeline 2: it FINISHED before, but its sources changed" in message
    assert ("and savepoint 4 holds nothing of it (it had FINISHED then); incarnation 2 ran it again since: resume "
            "without --from (`seatide resume j1`)") in message
    # The way on: each pipeline from its own checkpoint; pipeline 2 after its rerun's batch 0, none lost, none again.
    assert resume_job(store, "j1", plan=plan2, text=changed, variables={}) == []
    restore, rows = _restore(store)
    assert restore["prepare"] == {} and restore["fresh"] == [] and rows == {1: 1, 2: 0}


def test_from_an_older_savepoint_with_the_sources_it_knew_a_pipeline_finished_then_stays_finished(store, rerun):
    """Rewound to savepoint 4, as Flink restores a finished task: its output was complete there; what the
    rerun on other sources committed after that point is the abandoned branch's, as pipeline 1's is."""
    text, changed, plan2, dirs = rerun
    assert resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, savepoint_id=4) == []
    restore, rows = _restore(store)
    assert restore["prepare"] == {"1": savepoint_dir(dirs[1], 4)} and rows == {1: 1, 2: None}
    with store.read() as conn:
        assert conn.execute(select(s.pipelines.c.status).where(
            s.pipelines.c.incarnation == 3, s.pipelines.c.pipeline_id == 2)).scalar() == "FINISHED"


def test_with_fallback_fresh_it_starts_over_and_no_copy_is_planned_from_a_directory_never_written(store, rerun):
    text, changed, plan2, dirs = rerun
    answer = resume_job(store, "j1", plan=plan2, text=changed, variables={}, savepoint_id=4, fallback="fresh")
    restore, rows = _restore(store)
    assert restore["prepare"] == {"1": savepoint_dir(dirs[1], 4), "2": None}
    assert [entry["pipeline"] for entry in restore["fresh"]] == [2] and rows == {1: 1, 2: None}
    assert answer[0].startswith("pipeline 2: starts over, its checkpoint not restored: it FINISHED before, but its "
                                "sources changed")


def test_a_job_an_earlier_version_resumed_so_resumes_plainly_from_the_checkpoint_in_place(store, rerun):
    text, changed, plan2, dirs = rerun
    # What the earlier version recorded for `--from 4`: incarnation 3 copies savepoints/4/<p> in, 4/2 never written.
    copies = accepted_before(store, plan2, dirs, 3, 4)
    assert prepare_checkpoint(dirs[1], 3, copies["1"], 3, time.time) is not None
    with pytest.raises(FileNotFoundError):             # what its every attempt did
        prepare_checkpoint(dirs[2], 3, copies["2"], 3, time.time)
    answer = resume_job(store, "j1", plan=plan2, text=changed, variables={})
    assert answer == ["pipeline 2: incarnation 3 was to restore it from savepoint 4, which does not hold it (it had "
                      "not finished when that savepoint was taken, or it ran again after it had), and never could; "
                      "it was re-planned from its directory: it is restored from the checkpoint in place"]
    restore, rows = _restore(store)
    assert restore["prepare"] == {} and rows == {1: 1, 2: 0}     # pipeline 2 after its rerun's batch 0


def test_from_a_savepoint_a_pipeline_finished_then_and_not_run_since_stays_finished(store, tmp_path):
    text, changed, plan2, dirs = _rerun_since_savepoint(store, tmp_path, rerun=False)
    with pytest.raises(RestoreRefused) as refused:      # its sources changed since: it runs again, the fallback's
        resume_job(store, "j1", plan=plan2, text=changed, variables={}, savepoint_id=4)
    assert "pipeline 2: it FINISHED before, but its sources changed" in str(refused.value)
    assert resume_job(store, "j1", plan=build_plan(load_job_text(text)), text=text, variables={}, savepoint_id=4) == []
    restore, rows = _restore(store)
    assert restore["prepare"] == {"1": savepoint_dir(dirs[1], 4)} and rows == {1: 1, 2: None}
    with store.read() as conn:
        assert conn.execute(select(s.pipelines.c.status).where(
            s.pipelines.c.incarnation == 2, s.pipelines.c.pipeline_id == 2)).scalar() == "FINISHED"
