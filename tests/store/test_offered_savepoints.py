"""A refusal of `--from N`, and the checkpoint listing, offer only savepoints a resume accepts (outside review of
7d56489..26756a7, F4): they offered ones the same check then refused (older than a destroying fresh start, a copy
missing), with nothing to say they cannot be restored."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from sqlalchemy import insert

from seatide import intents
from seatide.store import schema as s
from seatide.store.checkpoint_views import checkpoint_report
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import savepoint_dir
from tests.store.test_dropped_output import DROPPED
from tests.store.test_owed_prepare import leader  # noqa: F401  leader
from tests.store.test_resume_from_named_savepoint import _fresh_start_after_savepoint_2
from tests.store.test_savepoint_restores_pipeline_left_out_since import TWO, _cancelled, _resume, _rows, _setup
from tests.store.test_store import store  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_refusal_offers_no_savepoint_older_than_a_destroying_fresh_start(leader, tmp_path):
    store = _fresh_start_after_savepoint_2(leader, tmp_path, DROPPED)   # savepoint 2 is older than a DROP_DATA
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", savepoint_id=99, actor="t")
    offered = str(refused.value)
    assert "its savepoints: 2 (taken" not in offered, offered
    assert "the job has no savepoints that can be restored (2 cannot), so resume without --from" in offered, offered
    with pytest.raises(intents.Refusal):
        intents.resume(store, "j1", savepoint_id=2, actor="t")      # what it no longer offers is refused


@sqlite_only
def test_a_savepoint_missing_a_copy_is_neither_offered_nor_listed_as_restorable(store, tmp_path):
    pipelines = _setup(store, tmp_path)         # savepoint 5 (incarnation 1) holds pipelines 1 and 2
    _resume(store, TWO, savepoint_id=5)         # incarnation 3 from it, which takes savepoint 6 and 7
    job, _ = _rows(store)
    with store.write() as conn:
        for sid in (6, 7):
            conn.execute(insert(s.checkpoints).values(
                job_id="j1", incarnation=job.incarnation, checkpoint_id=sid, pipeline_id=0, batch_id=3,
                kind="SAVEPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
                source_offsets=json.dumps({"pipelines": {"1": 3, "2": 3}}), fingerprint="", attempt_id=1))
    for sid in (6, 7):
        for pid in (1, 2):
            shutil.copytree(savepoint_dir(pipelines[pid].checkpoint_dir, 5), savepoint_dir(pipelines[pid].checkpoint_dir, sid))
    shutil.rmtree(savepoint_dir(pipelines[2].checkpoint_dir, 6))
    _cancelled(store)
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO, savepoint_id=99)
    message = str(refused.value)
    assert "its savepoints: 5 (taken " in message and ", 7 (taken " in message, message
    assert "6 (taken" not in message, message
    with store.read() as conn:
        listed = {c["checkpointId"]: c for c in checkpoint_report(conn, "j1")["history"]}
    assert listed[7]["unrestorable"] is None
    copy = savepoint_dir(pipelines[2].checkpoint_dir, 6)
    assert listed[6]["unrestorable"] == (f"its copy of pipeline 2 ({copy}) is missing, so it holds no position to go "
                                         "on from"), listed[6]
    with pytest.raises(RestoreRefused) as again:
        _resume(store, TWO, savepoint_id=6)
    assert listed[6]["unrestorable"] in str(again.value)
