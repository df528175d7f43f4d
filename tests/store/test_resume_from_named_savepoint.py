"""``seatide resume JOB --from N``: the savepoint named is checked when the resume is asked (outside review 9).

F1: a savepoint the job's run does not have (no such id, a checkpoint's id, an earlier run's, one whose
copy is gone from the data directory) is refused at once, naming the savepoint, the job and the
savepoints it has, whatever the fallback: ``--fallback fresh`` starts over pipelines whose checkpoint
cannot be used, it never turns a resume from a savepoint that is not there into a fresh start.

F3: a savepoint taken before a fresh start (``--fallback fresh``) whose save modes emptied a target the
savepoint's lineage had committed into cannot be restored: it goes on from offsets whose output is gone
(``store/dropped_output.py``, as for a backup from before that fresh start). Refused, naming the fresh
start and its time and the ways on; one whose fresh start destroyed nothing is restored.

Set up as tests/store/test_dropped_output.py: the store's and the leader's own steps, no worker, a
driver's work done by calling what it calls.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from sqlalchemy import insert, update

from seatide import intents
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.store import schema as s
from seatide.store.restore import savepoint_dir
from tests.store.test_decided_batches import CHECKPOINTED, _decided, _planned, _prepared
from tests.store.test_dropped_output import DROPPED, _save_modes_decided
from tests.store.test_owed_prepare import _cancel, _checkpoint, _job, _pipeline, leader  # noqa: F401  leader
from tests.store.test_store import submit

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


def _refused(store, savepoint_id: int, **kwargs) -> str:
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", savepoint_id=savepoint_id, actor="t", **kwargs)
    assert _job(store).incarnation == 1, "nothing is recorded"
    return str(refused.value)


def _savepoint_2(leader, tmp_path):
    """j1 checkpointed batch 0 (checkpoint 1), stopped with savepoint 2, checkpoint 3 at batch 1; cancelled."""
    coordinator, store = leader
    submit(store, tmp_path, text=CHECKPOINTED)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 1, 0)
    _checkpoint(store, savepoint_dir(directory, 2), 2, 0, kind="SAVEPOINT")
    _checkpoint(store, directory, 3, 1)
    _cancel(coordinator, store)
    return store, directory


@both_stores
@pytest.mark.parametrize("named,why", [
    (99, "job j1 has no savepoint 99"),
    (3, "3 is a checkpoint of job j1, not a savepoint"),
])
def test_a_savepoint_the_job_does_not_have_is_refused_naming_those_it_has(leader, tmp_path, named, why):
    store, _ = _savepoint_2(leader, tmp_path)
    for fallback in (None, "fresh"):
        message = _refused(store, named, fallback=fallback)
        assert f"cannot resume job j1 from savepoint {named}: {why}" in message, message
        assert "its savepoints: 2 (taken " in message and "`seatide checkpoints j1` lists them" in message, message


@both_stores
def test_a_savepoint_whose_copy_is_gone_is_refused_whatever_the_fallback(leader, tmp_path):
    """Removed from the data directory (by hand, a restore of an older backup of it): with --fallback fresh
    it was accepted and started the pipeline over, a resume the user never asked for."""
    store, directory = _savepoint_2(leader, tmp_path)
    shutil.rmtree(savepoint_dir(directory, 2))
    for fallback in ("fresh", None):
        message = _refused(store, 2, fallback=fallback)
        assert f"cannot resume job j1 from savepoint 2: its copy of pipeline 1 ({savepoint_dir(directory, 2)}) " \
               "is missing" in message, message
        assert "the job has no other savepoints, so resume without --from (`seatide resume j1`)" in message, message


def _fresh_start_after_savepoint_2(leader, tmp_path, record: dict):
    """Lineage l1 committed batch 0 into /out, stopped with savepoint 2 (a copy of its directory); resumed with
    --fallback fresh, whose driver made lineage l2 and decided ``record`` for the target; cancelled."""
    coordinator, store = leader
    submit(store, tmp_path, text=CHECKPOINTED)
    directory = _pipeline(store).checkpoint_dir
    _prepared(directory)
    _planned(directory, 0)
    _decided(store, 0)
    with store.write() as conn:
        conn.execute(update(s.sink_manifests).where(s.sink_manifests.c.batch_id == 0).values(
            manifest=json.dumps({"publish": {"targets": {"/out": {"moves": []}}}, "state": {}})))
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=1, checkpoint_id=2, pipeline_id=0, batch_id=0, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 0}}), fingerprint="", attempt_id=1))
    shutil.copytree(directory, savepoint_dir(directory, 2))
    _cancel(coordinator, store)
    shutil.rmtree(directory)        # its checkpoint lost: the resume's fallback starts it over
    intents.resume(store, "j1", fallback="fresh", actor="t")
    assert json.loads(_job(store).restore)["fresh"], "a fresh start"
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _prepared(directory, lineage="l2")
    _save_modes_decided(store, record)
    _cancel(coordinator, store)
    return store


@both_stores
def test_a_savepoint_from_before_a_fresh_start_that_emptied_its_target_is_refused(leader, tmp_path):
    store = _fresh_start_after_savepoint_2(leader, tmp_path, DROPPED)
    with store.read() as conn:
        decided_at = conn.execute(s.sink_manifests.select().where(s.sink_manifests.c.batch_id == -1)).one().decided_at
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(decided_at))
    for fallback in (None, "fresh"):
        with pytest.raises(intents.Refusal) as refused:
            intents.resume(store, "j1", savepoint_id=2, fallback=fallback, actor="t")
        message = str(refused.value)
        assert "cannot resume job j1 from savepoint 2: it is older than the fresh start of pipeline 1 by " \
               f"incarnation 2 (lineage l2), at {at} UTC, which prepared target /out with a save mode that " \
               "destroys" in message, message
        assert "the job has no savepoints taken since that fresh start, so resume without --from (`seatide resume " \
               "j1`)" in message, message
    assert _job(store).incarnation == 2


@both_stores
def test_a_savepoint_from_before_a_fresh_start_that_destroyed_nothing_is_restored(leader, tmp_path):
    store = _fresh_start_after_savepoint_2(leader, tmp_path, {**DROPPED, "destroy": None})
    intents.resume(store, "j1", savepoint_id=2, actor="t")
    assert json.loads(_job(store).restore)["prepare"] == {"1": savepoint_dir(_pipeline(store).checkpoint_dir, 2)}


@both_stores
def test_a_savepoint_taken_after_that_fresh_start_is_offered_and_restored(leader, tmp_path):
    store = _fresh_start_after_savepoint_2(leader, tmp_path, DROPPED)
    directory = _pipeline(store).checkpoint_dir
    _planned(directory, 0)
    with store.write() as conn:     # the fresh start's lineage l2 stopped with savepoint 7 (incarnation 2)
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=2, checkpoint_id=7, pipeline_id=0, batch_id=0, kind="SAVEPOINT",
            status="COMPLETED", created_at=time.time(), duration_ms=1, rows=0,
            source_offsets=json.dumps({"pipelines": {"1": 0}}), fingerprint="", attempt_id=2))
    shutil.copytree(directory, savepoint_dir(directory, 7))
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", savepoint_id=2, actor="t")
    assert "its savepoints taken since that fresh start: 7 (taken " in str(refused.value), str(refused.value)
    intents.resume(store, "j1", savepoint_id=7, actor="t")
    assert json.loads(_job(store).restore)["prepare"] == {"1": savepoint_dir(directory, 7)}
