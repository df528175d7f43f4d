"""A sink's decided batch counts as a checkpoint of its pipeline's directory (store/decided_batches.py).

The end-to-end story (a batch written twice before, refused now) is tests/e2e/test_backup_put_back.py;
here, on both stores, which decisions count: those since the directory was made (a fresh start's
move excuses the lineage before it), never a save mode's (batch -1), and a directory that still holds
its metadata is resumed as before. Set up as tests/store/test_fresh_made_empty.py: the store's and the
leader's own steps, no worker, a driver's work done by calling what it calls.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from sqlalchemy import insert

from seatide import intents
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.decided_batches import Decided, lost_lineage
from tests.store.test_owed_prepare import _cancel, _checkpoint, _fingerprint, _job, _pipeline, leader  # noqa: F401  leader
from tests.store.test_store import JOB, submit

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


CHECKPOINTED = "env { checkpoint.interval = 1000 }\n" + JOB


def _planned(directory: str, up_to: int) -> None:
    """Spark's plan of batches 0..``up_to`` in the directory (a checkpointed pipeline's offsets log)."""
    os.makedirs(os.path.join(directory, "spark", "offsets"), exist_ok=True)
    for batch in range(up_to + 1):
        with open(os.path.join(directory, "spark", "offsets", str(batch)), "w") as handle:
            handle.write("v1\n{}\n")


def _decided(store, batch: int, lineage: str = "l1") -> None:
    """What a driver's sink leaves when it decides ``batch`` (reporter.decide_batch), checkpoint row or not."""
    job = _job(store)
    with store.write() as conn:
        conn.execute(insert(s.sink_manifests).values(
            job_id="j1", incarnation=job.incarnation, pipeline_id=1, plugin_id="sink-0",
            transaction_id=f"T_j1_1_0_{lineage}_{batch}", batch_id=batch, attempt_id=1, status="PUBLISHED",
            manifest=json.dumps({"publish": {}, "state": {}}), decided_at=time.time(), published_at=time.time()))


def _prepared(directory: str, lineage: str = "l1") -> None:
    """The pipeline's directory as its driver's _prepare_dir leaves it before any batch is planned."""
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": lineage, "fingerprint": _fingerprint()})


def _refusal(store) -> str:
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", actor="t")
    return str(refused.value)


def _decided_then_cancelled(leader, tmp_path, batch: int, text: str = JOB):
    """Its driver prepared the directory and its sink decided ``batch``; cancelled before the checkpoint row.
    A batch above 0 is a checkpointed job's (``text``): a plain one has batch 0 only (store/batch_mode.py)."""
    coordinator, store = leader
    submit(store, tmp_path, text=text)
    directory = _pipeline(store).checkpoint_dir
    _prepared(directory)
    _decided(store, batch)
    _cancel(coordinator, store)
    return coordinator, store, directory


@both_stores
def test_a_decided_batch_with_no_checkpoint_row_needs_the_directorys_metadata(leader, tmp_path):
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    shutil.rmtree(directory)                     # a backup from before the pipeline's first start put back
    message = _refusal(store)
    assert "pipeline 1: its sinks committed batch 0" in message and "is missing" in message, message
    assert "newer backup" in message and "--fallback fresh" in message, message
    assert _job(store).incarnation == 1
    os.makedirs(directory)                       # ... or an empty directory: the same
    assert "holds no SeaTide checkpoint" in _refusal(store)
    _prepared(directory)                         # its lineage back: batch 0 is found decided on replay
    intents.resume(store, "j1", actor="t")
    assert _job(store).incarnation == 2


@both_stores
def test_a_fresh_start_excuses_the_decisions_of_the_lineage_before_it(leader, tmp_path):
    """Batch 3 decided by incarnation 1, no checkpoint row; resumed with --fallback fresh, whose
    driver made the empty directory, cancelled before it planned a batch: the empty directory is
    what incarnation 2 started from, and resumes plainly. Once incarnation 2 decided a batch of its
    own, the same empty directory is refused."""
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 3)
    intents.resume(store, "j1", fallback="fresh", actor="t")
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _cancel(coordinator, store)
    intents.resume(store, "j1", actor="t")       # incarnation 3, in place: not refused
    assert _job(store).incarnation == 3
    _decided(store, 0, lineage="l2")
    _cancel(coordinator, store)
    assert "its sinks committed batch 0" in _refusal(store)


@both_stores
def test_a_save_modes_decision_is_no_batch(leader, tmp_path):
    """A target's save modes are decided (batch -1) at the first batch, before any rows: the
    pipeline wrote nothing yet, so a missing directory is no reason to refuse."""
    coordinator, store = leader
    submit(store, tmp_path)
    _decided(store, -1)
    _cancel(coordinator, store)
    intents.resume(store, "j1", actor="t")
    assert _job(store).incarnation == 2


def fresh_start_after_a_backup(leader, tmp_path):
    """Lineage l1 decided batch 0 (incarnation 1), its directory backed up; resumed with --fallback
    fresh, whose driver made the empty directory of lineage l2. (coordinator, store, directory, backup)"""
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0, CHECKPOINTED)
    _planned(directory, 0)
    backup = str(tmp_path / "backup")
    shutil.copytree(directory, backup)
    intents.resume(store, "j1", fallback="fresh", actor="t")
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _prepared(directory, lineage="l2")
    return coordinator, store, directory, backup


@both_stores
def test_a_directory_of_another_lineage_than_the_last_decided_is_refused(leader, tmp_path):
    """Review 2, F2: lineage l1 decided batch 0; a fresh start's lineage l2 decided 0 and 1. A backup
    of l1's directory put back is older than l2's batches; l2's own directory is resumed."""
    coordinator, store, directory, backup = fresh_start_after_a_backup(leader, tmp_path)
    _planned(directory, 1)
    _decided(store, 0, lineage="l2")
    _decided(store, 1, lineage="l2")
    _cancel(coordinator, store)
    fresh = str(tmp_path / "fresh")
    os.rename(directory, fresh)
    shutil.copytree(backup, directory)
    message = _refusal(store)
    assert "holds lineage l1" in message and "under lineage l2 (up to batch 1)" in message, message
    assert "newer backup" in message and "--fallback fresh" in message, message
    shutil.rmtree(directory)
    os.rename(fresh, directory)
    intents.resume(store, "j1", actor="t")
    assert _job(store).incarnation == 3


@both_stores
def test_a_checkpointed_pipelines_directory_needs_sparks_plan_of_the_last_decided_batch(leader, tmp_path):
    """Review 2, F1: a checkpointed pipeline (micro-batches) whose sinks decided batch 1 needs Spark's
    plan of it (offsets/1): a directory holding batch 0's only is a backup from before batch 1, which
    Spark would plan again, maybe otherwise."""
    checkpointed = CHECKPOINTED
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 1, checkpointed)
    os.makedirs(os.path.join(directory, "spark", "offsets"))
    message = _refusal_of(store, checkpointed)
    assert "holds Spark's plan of no batch (offsets/1 is missing" in message, message
    with open(os.path.join(directory, "spark", "offsets", "0"), "w") as handle:
        handle.write("v1\n{}\n")
    message = _refusal_of(store, checkpointed)
    assert "pipeline 1: its sinks committed batch 1" in message and "batches up to 0 only" in message, message
    assert "newer backup" in message and "--fallback fresh" in message, message
    with open(os.path.join(directory, "spark", "offsets", "1"), "w") as handle:
        handle.write("v1\n{}\n")
    intents.resume(store, "j1", text=checkpointed, actor="t")
    assert _job(store).incarnation == 2


def _refusal_of(store, text: str) -> str:
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", text=text, actor="t")
    return str(refused.value)


@both_stores
def test_checkpoint_rows_count_for_sinks_that_decide_nothing_in_the_store(leader, tmp_path):
    """A Jdbc or Redis sink commits in its own system: no decision here, but its batches reach
    checkpoint rows. A backup taken at checkpoint 0 put back after checkpoint 1 would have Spark plan
    batch 1 again, which the target's own record of it then skips: refused as older."""
    coordinator, store = leader
    submit(store, tmp_path, text=CHECKPOINTED)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 1, 0, micro_batch=True)
    backup = str(tmp_path / "backup")
    shutil.copytree(directory, backup)
    _checkpoint(store, directory, 2, 1, micro_batch=True)
    _cancel(coordinator, store)
    shutil.rmtree(directory)
    shutil.copytree(backup, directory)
    checkpointed = "env { checkpoint.interval = 1000 }\n" + JOB
    message = _refusal_of(store, checkpointed)
    assert "pipeline 1: its sinks committed batch 1, but" in message and "batches up to 0 only" in message, message
    with open(os.path.join(directory, "spark", "offsets", "1"), "w") as handle:
        handle.write("v1\n{}\n")             # the backup taken at checkpoint 1
    intents.resume(store, "j1", text=checkpointed, actor="t")
    assert _job(store).incarnation == 2


@both_stores
def test_a_resume_in_another_execution_mode_is_refused(leader, tmp_path):
    """Review 3, F1: batch 0 decided by micro-batches (a STREAMING job, or BATCH with an interval), then
    resumed as a plain batch: it would write every row as batch 0, skipped as decided. A directory from
    before the mode was recorded ran checkpointed if it holds Spark's offsets log; seatide.json's record
    says it otherwise. The reverse is refused as a mode change too, not as an old backup."""
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    os.makedirs(os.path.join(directory, "spark", "offsets"))
    with open(os.path.join(directory, "spark", "offsets", "0"), "w") as handle:
        handle.write("v1\n{}\n")
    message = _refusal(store)                    # the job as submitted: plain; no mode recorded
    assert "pipeline 1: it ran in micro-batches" in message and "committed batches up to 0" in message, message
    assert "without checkpoint.interval" in message and "original env" in message, message
    assert "--fallback fresh" in message and "newer backup" not in message, message
    _prepared_as(directory, micro_batch=True)    # recorded: no offsets log needed to tell
    shutil.rmtree(os.path.join(directory, "spark"))
    assert "pipeline 1: it ran in micro-batches" in _refusal(store)
    _prepared_as(directory, micro_batch=False)
    message = _refusal_of(store, "env { job.mode = STREAMING }\n" + JOB)
    assert "pipeline 1: it ran as one plain batch" in message and "with checkpoint.interval" in message, message
    assert "offsets/0" not in message and "newer backup" not in message, message
    intents.resume(store, "j1", actor="t")       # its own mode
    assert _job(store).incarnation == 2


def _prepared_as(directory: str, micro_batch: bool) -> None:
    write_json_atomic(os.path.join(directory, "seatide.json"),
                      {"lineage": "l1", "fingerprint": _fingerprint(), "micro_batch": micro_batch})


@both_stores
def test_an_unreadable_move_mark_or_metadata_is_named_in_the_refusal(leader, tmp_path):
    """Review 3, F3 and F2: a move mark whose attempt is a string raised a TypeError from the resume
    (a traceback); a corrupt seatide.json was called "lineage None ... a backup from before them"."""
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    write_json_atomic(os.path.join(directory, "seatide-restore.json"), {"incarnation": 1, "from": None,
                                                                         "attempt": "7"})
    os.makedirs(os.path.join(directory, "spark.attempt-3", "offsets"))     # an attempt's Spark checkpoint
    message = _refusal_of(store, "env { checkpoint.interval = 1000 }\n" + JOB)
    assert f"{directory}/seatide-restore.json is unreadable" in message and "attempt" in message, message
    os.remove(os.path.join(directory, "seatide-restore.json"))
    with open(os.path.join(directory, "seatide.json"), "w") as handle:
        handle.write('{"lineage": ')
    message = _refusal(store)                    # the resume's own check of the metadata names it
    assert f"metadata {directory}/seatide.json is unreadable" in message and "lineage None" not in message, message
    # a retry's driver asks lost_lineage alone (runtime/lost_directory.py)
    message = lost_lineage(directory, Decided(0, "l1"))
    assert f"{directory}/seatide.json is unreadable" in message and "lineage None" not in message, message
