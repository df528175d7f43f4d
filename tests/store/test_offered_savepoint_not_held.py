"""A refusal offers no savepoint that --from refuses for a pipeline it does not hold (named_savepoint.unrestorable
asks savepoint_scope.not_held_refused). Outside review of b5aba34..HEAD, R3: "A refusal offers only the savepoints a resume would accept" (F4). The
offer is filtered by ``named_savepoint.unrestorable`` (a copy, a destroying fresh start, a release), which does
not ask what ``--from`` also refuses: a pipeline the savepoint does not hold because the job did not have it
then (``savepoint_scope.not_held_problem``). The offered savepoint is then refused in turn."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from sqlalchemy import insert, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import savepoint_dir
from tests.store.test_savepoint_restores_pipeline_left_out_since import (ONE, TWO, _cancelled, _resume, _rows,
                                                                          _state)
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _savepoint(conn, incarnation, savepoint_id, held):
    conn.execute(insert(s.checkpoints).values(
        job_id="j1", incarnation=incarnation, checkpoint_id=savepoint_id, pipeline_id=0, batch_id=3,
        kind="SAVEPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
        source_offsets=json.dumps({"pipelines": held}), fingerprint="", attempt_id=1))


def test_a_savepoint_the_refusal_offers_is_refused_when_named(store, tmp_path):
    submit(store, tmp_path, text=ONE)                  # incarnation 1: pipeline 1 only, stopped with savepoint 5
    fp = {p.pipeline_id: p.fingerprint() for p in build_plan(load_job_text(TWO)).pipelines}
    _, pipelines = _rows(store)
    one = pipelines[1].checkpoint_dir
    with store.write() as conn:
        _state(one, "l1", fp[1], 3)
        _state(savepoint_dir(one, 5), "l1", fp[1], 3)
        _savepoint(conn, 1, 5, {"1": 3})
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=3))
    _cancelled(store)
    _resume(store, TWO)                                 # incarnation 2 adds pipeline 2; stopped with savepoint 7
    _, pipelines = _rows(store)
    with store.write() as conn:
        for pid in (1, 2):
            _state(pipelines[pid].checkpoint_dir, f"l{pid}", fp[pid], 6)
            _state(savepoint_dir(pipelines[pid].checkpoint_dir, 7), f"l{pid}", fp[pid], 6)
        _savepoint(conn, 2, 7, {"1": 6, "2": 6})
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1", s.pipelines.c.incarnation == 2)
                     .values(last_batch_id=6))
    _cancelled(store)
    shutil.rmtree(savepoint_dir(pipelines[1].checkpoint_dir, 7))    # savepoint 7's copy of pipeline 1 is lost

    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO, savepoint_id=7)
    offer = str(refused.value)
    print(offer)
    if "5 (taken" in offer:                             # offered as one a resume accepts: name it
        with pytest.raises(RestoreRefused) as again:
            _resume(store, TWO, savepoint_id=5)
        pytest.fail(f"offered savepoint 5:\n{offer}\n...and --from 5 is refused:\n{again.value}")
    assert "no other savepoints that can be restored (5 cannot)" in offer, offer


def test_a_savepoint_taken_before_the_job_had_a_pipeline_is_refused_naming_the_plain_resume(store, tmp_path):
    """Named anyway, --from 5 is refused naming the way that writes no row twice (the plain resume); a start over
    is named only as what it is: it writes again the rows pipeline 2 committed."""
    submit(store, tmp_path, text=ONE)
    _, pipelines = _rows(store)
    one = pipelines[1].checkpoint_dir
    fp = {p.pipeline_id: p.fingerprint() for p in build_plan(load_job_text(TWO)).pipelines}
    with store.write() as conn:
        _state(one, "l1", fp[1], 3)
        _state(savepoint_dir(one, 5), "l1", fp[1], 3)
        _savepoint(conn, 1, 5, {"1": 3})
    _cancelled(store)
    _resume(store, TWO)                                 # incarnation 2 adds pipeline 2
    _cancelled(store)
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO, savepoint_id=5)
    message = str(refused.value)
    assert "pipeline 2: savepoint 5 was taken before the job had this pipeline" in message, message
    assert "resume without --from (`seatide resume j1`)" in message, message
    assert "start those pipelines over" not in message and "would write again every row it committed" in message, message
