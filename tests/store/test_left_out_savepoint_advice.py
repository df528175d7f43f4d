"""A pipeline brought back after a config left it out: its refusal names a savepoint only when no batch was
committed after it (store/left_out.py). Outside review of b5aba34..HEAD, R1: a plain resume refused for a pipeline a config left out since advises
`--from N` for the newest savepoint that holds it, saying it "writes no row twice". That savepoint need not be the
pipeline's latest state: it ran on after it (a plain resume) and committed more batches before a config left it
out. `--from N` rewinds it (and every other pipeline) to the savepoint: the batches it committed since are planned
again under a new lineage (new transaction ids), so their rows are written again."""

from __future__ import annotations

import json
import os
import time

import pytest
from sqlalchemy import insert, update

from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import savepoint_dir
from tests.store.test_savepoint_restores_pipeline_left_out_since import (ONE, TWO, _cancelled, _resume, _rows,
                                                                          _state)
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan

pytestmark = sqlite_only


def _checkpoint(conn, incarnation, checkpoint_id, pid, batch, fingerprint):
    conn.execute(insert(s.checkpoints).values(
        job_id="j1", incarnation=incarnation, checkpoint_id=checkpoint_id, pipeline_id=pid, batch_id=batch,
        kind="CHECKPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=10,
        source_offsets=json.dumps({"batch": batch}), fingerprint=fingerprint, attempt_id=1))


def at_batch_3_with_savepoint_5(store, tmp_path):
    """Incarnation 1 of TWO: both pipelines at batch 3, stopped with savepoint 5 (cancelled). Its plan and rows."""
    submit(store, tmp_path, text=TWO)
    plan = build_plan(load_job_text(TWO))
    _, pipelines = _rows(store)
    with store.write() as conn:          # incarnation 1: both at batch 3, stopped with savepoint 5
        for p in plan.pipelines:
            directory = pipelines[p.pipeline_id].checkpoint_dir
            _state(directory, f"l{p.pipeline_id}", p.fingerprint(), 3)
            _state(savepoint_dir(directory, 5), f"l{p.pipeline_id}", p.fingerprint(), 3)
            _checkpoint(conn, 1, p.pipeline_id + 2, p.pipeline_id, 3, p.fingerprint())
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=5, pipeline_id=0, batch_id=3, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 3, "2": 3}}), fingerprint="", attempt_id=1))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=3))
    _cancelled(store)
    return plan, pipelines


def test_the_advised_savepoint_rewinds_the_left_out_pipeline_past_batches_it_committed_since(store, tmp_path):
    plan, pipelines = at_batch_3_with_savepoint_5(store, tmp_path)
    _resume(store, TWO)                  # incarnation 2: a plain resume; both run on to batch 9 and commit it
    with store.write() as conn:
        for p in plan.pipelines:
            _state(pipelines[p.pipeline_id].checkpoint_dir, f"l{p.pipeline_id}", p.fingerprint(), 9)
            _checkpoint(conn, 2, p.pipeline_id + 10, p.pipeline_id, 9, p.fingerprint())
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1", s.pipelines.c.incarnation == 2)
                     .values(last_batch_id=9))
    _cancelled(store)
    _resume(store, ONE, fallback="fresh")    # incarnation 3: a config that leaves pipeline 2 out
    _cancelled(store)

    # pipeline 2's own directory still holds its checkpoint at batch 9: nothing of it is lost in place
    assert os.path.isfile(os.path.join(pipelines[2].checkpoint_dir, "spark", "offsets", "9"))
    with pytest.raises(RestoreRefused) as refused:      # incarnation 4 asked with both again
        _resume(store, TWO)
    message = str(refused.value)
    print(message)
    advised = "--from 5`), which restores it from its copy and writes no row twice" in message
    if advised:                                         # follow the advice, as a user would
        _resume(store, TWO, savepoint_id=5)
        job, now = _rows(store)
        # pipeline 2 committed batches 4..9 in incarnation 2, after savepoint 5: the advised resume goes on from 3
        assert now[2].last_batch_id == 9, (
            f"the refusal advised `--from 5` as writing no row twice, yet it rewinds pipeline 2 to batch "
            f"{now[2].last_batch_id}, before batches 4..9 it committed in incarnation 2 (written again); restore: "
            f"{job.restore}")
    assert "--from" not in message, f"a savepoint advised though batches were committed after it: {message}"
    assert "a way on that writes none twice: leave it out again" in message, message
