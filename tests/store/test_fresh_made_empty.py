"""A fresh start that was made and then cancelled before any checkpoint completed is resumed
from its directory, as it is: empty (store/restore.py, ``_holds_checkpoint``).

The new incarnation's driver set the old directory aside and made an empty one, with a mark that
names the incarnation that made it (runtime/checkpoint_move.py). Nothing completed since then, so
the directory holds exactly what the last incarnation started from: nothing. A plain resume
restores that, and must not ask for --fallback fresh again because of checkpoints of incarnations
from before the fresh start. What must stay refused: a directory no later move made (no mark, a
mark older than the release), and a missing one when checkpoints since its making exist; a fresh
start never made is still owed.

Set up as tests/store/test_owed_prepare.py does: the store's and the leader's own steps, no worker,
so a driver's work is done by calling what it calls. SQLite only: the store mechanism is not the subject.
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
from seatide.store.restore import RestoreRefused, savepoint_dir
from seatide.store.runs import PREPARED_MARK
from tests.store.test_owed_prepare import (_cancel, _checkpoint, _events, _fingerprint,  # noqa: F401  leader
                                           _job, _pipeline, _released_then_resumed_fresh, _resume, leader)
from tests.store.test_store import submit
from tests.stores import sqlite_only

# SQLite, but the count (fresh_made.checkpointed) is a query of its own: the main story on both stores
both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


def _as_prepare_dir_leaves_it(directory):
    """The pipeline's _prepare_dir ran after the move (seatide.json), no batch planned (no offsets)."""
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "new", "fingerprint": _fingerprint()})


def _release_fresh_start_made(leader, tmp_path, prepared: bool):
    """Batch 4 checkpointed; cancelled and released; resumed fresh (incarnation 2), whose driver made
    the move (and, ``prepared``, wrote seatide.json); cancelled before any checkpoint completed."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)
    if prepared:
        _as_prepare_dir_leaves_it(directory)
    _cancel(coordinator, store)
    return coordinator, store, directory


def _changed_source_fresh_start_made(leader, tmp_path, prepared: bool):
    """Batch 5 checkpointed by other sources (its seatide.json's fingerprint); resumed with
    --fallback fresh (incarnation 2), whose driver made the move; cancelled before any checkpoint."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 8, 5)
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "l8", "fingerprint": "other sources"})
    _cancel(coordinator, store)
    with pytest.raises(RestoreRefused, match="different pipeline"):
        _resume(store)
    _resume(store, fallback="fresh")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None}
    prepare_checkpoint(directory, 2, None, 1, time.time)
    if prepared:
        _as_prepare_dir_leaves_it(directory)
    _cancel(coordinator, store)
    return coordinator, store, directory


MADE = {"release": _release_fresh_start_made, "changed source": _changed_source_fresh_start_made}


@both_stores
@pytest.mark.parametrize("prepared", [False, True], ids=["moved", "prepared"])
@pytest.mark.parametrize("case", sorted(MADE))
def test_a_fresh_start_made_and_cancelled_before_a_checkpoint_resumes_plainly(leader, tmp_path, case, prepared):
    coordinator, store, directory = MADE[case](leader, tmp_path, prepared)
    fresh_events = len(_events(store, "RESTORE_FALLBACK_FRESH"))
    answer = intents.resume(store, "j1", actor="t")          # no --fallback fresh asked again
    job = _job(store)
    restore = json.loads(job.restore)
    assert job.incarnation == 3
    # restored in place, not a fallback: no move, no fresh entry, no new RESTORE_FALLBACK_FRESH event
    assert (restore["prepare"], restore["fresh"], restore["fallback"]) == ({}, [], "fail"), restore
    assert len(_events(store, "RESTORE_FALLBACK_FRESH")) == fresh_events
    assert _events(store, "JOB_RESUMED")[-1]["pipelines_restored"] == [1]
    assert _pipeline(store).last_batch_id is None
    # the answer says what the directory holds: incarnation 2's fresh start, nothing since
    said = [w for w in answer.warnings if "incarnation 2" in w and "no checkpoint" in w]
    assert said and not [w for w in said if "fallback" in w], answer.warnings
    assert os.path.isdir(directory) and os.listdir(directory)        # nothing moved by the resume


@sqlite_only
def test_the_release_line_holds_after_the_plain_resume(leader, tmp_path):
    """Resumed plainly from the empty directory (incarnation 3), cancelled before its driver ran:
    nothing owed (it decided no move), still resumable; a savepoint before the release still refused."""
    coordinator, store, directory = _release_fresh_start_made(leader, tmp_path, prepared=True)
    _resume(store)
    _cancel(coordinator, store)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert (restore["prepare"], restore["fresh"], restore["release_incarnation"]) == ({}, [], 1), restore


def _failed_checkpoint(store, checkpoint_id: int, batch: int) -> None:
    """A checkpoint that timed out (reporter.checkpoint_failed): a row of the incarnation, none COMPLETED.
    Its driver records one only after its move, so the move is not owed whatever the directory says."""
    job = _job(store)
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=job.incarnation, checkpoint_id=checkpoint_id, pipeline_id=1, batch_id=batch,
            kind="CHECKPOINT", status="FAILED", created_at=time.time(), duration_ms=1, rows=0, source_offsets=None,
            fingerprint=_fingerprint(), attempt_id=1))


def _unmark(directory, mark):
    os.remove(os.path.join(directory, PREPARED_MARK))
    if mark is not None:
        write_json_atomic(os.path.join(directory, PREPARED_MARK), {"incarnation": mark, "from": None})


@sqlite_only
@pytest.mark.parametrize("mark", [None, 1], ids=["no mark", "mark of the released incarnation"])
@pytest.mark.parametrize("prepared", [False, True], ids=["moved", "prepared"])
def test_a_directory_no_later_move_made_is_not_restored_after_a_release(leader, tmp_path, mark, prepared):
    """The empty directory's mark removed, or naming the released incarnation, no checkpoint row of
    incarnation 2: the move counts as never made, so the release's fresh start is carried, not restored."""
    coordinator, store, directory = _release_fresh_start_made(leader, tmp_path, prepared)
    _unmark(directory, mark)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert restore["prepare"] == {"1": None} and restore["fresh"][0]["released"] is True, restore


@sqlite_only
@pytest.mark.parametrize("mark", [None, 1], ids=["no mark", "mark of the released incarnation"])
@pytest.mark.parametrize("prepared", [False, True], ids=["moved", "prepared"])
def test_a_directory_no_later_move_made_is_refused_when_a_release_decides_it(leader, tmp_path, mark, prepared):
    """As above, but incarnation 2 recorded a (failed) checkpoint: its move was made, the directory in
    place is not its (no mark of it), so the checkpoints from before the release count and it is refused."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)
    if prepared:
        _as_prepare_dir_leaves_it(directory)
    _failed_checkpoint(store, 9, 0)
    _cancel(coordinator, store)
    _unmark(directory, mark)
    with pytest.raises(RestoreRefused):
        _resume(store)
    assert _job(store).incarnation == 2


@sqlite_only
def test_a_release_directory_with_an_old_mark_and_an_old_checkpoint_is_refused(leader, tmp_path):
    """A backup of the released incarnation's checkpoint (batch 4, all its files) put back with a
    mark of incarnation 1, after incarnation 2 made its move (a failed checkpoint recorded): the
    release line refuses it."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _failed_checkpoint(store, 9, 0)
    _cancel(coordinator, store)
    aside = [n for n in os.listdir(os.path.dirname(directory)) if n.startswith("1.discarded-")]
    shutil.rmtree(directory)
    shutil.copytree(os.path.join(os.path.dirname(directory), aside[0]), directory)
    write_json_atomic(os.path.join(directory, PREPARED_MARK), {"incarnation": 1, "from": None})
    with pytest.raises(RestoreRefused, match="released at incarnation 1"):
        _resume(store)


@sqlite_only
def test_a_fresh_start_never_made_is_still_carried(leader, tmp_path):
    """Incarnation 2 cancelled before its driver ran (no mark of it): the release's fresh start is
    owed, carried on without --fallback fresh, never restored from batch 4 in place."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    _cancel(coordinator, store)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert restore["prepare"] == {"1": None} and restore["fresh"][0]["released"] is True, restore


@sqlite_only
@pytest.mark.parametrize("case", sorted(MADE))
def test_a_missing_directory_with_checkpoints_since_its_making_is_refused(leader, tmp_path, case):
    """Incarnation 2 made the directory and completed batch 0 in it; the directory then vanished."""
    coordinator, store, directory = MADE[case](leader, tmp_path, prepared=True)
    _resume(store)                       # incarnation 3, in place
    _checkpoint(store, directory, 20, 0)
    _cancel(coordinator, store)
    shutil.rmtree(directory)
    with pytest.raises(RestoreRefused, match="is missing"):
        _resume(store)


@sqlite_only
@pytest.mark.parametrize("by", [2, 3], ids=["by the maker", "by a later incarnation"])
@pytest.mark.parametrize("lost", ["seatide.json", "offsets"])
def test_a_made_directory_that_lost_a_checkpoint_since_is_refused(leader, tmp_path, lost, by):
    """Batch 0 completed in the directory incarnation 2 made (by incarnation 2 itself, after its move,
    or by 3, resumed in place): a missing seatide.json or offsets log is a lost checkpoint again."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _as_prepare_dir_leaves_it(directory)
    if by == 3:
        _cancel(coordinator, store)
        _resume(store)
    _checkpoint(store, directory, 20, 0)
    _cancel(coordinator, store)
    if lost == "seatide.json":
        os.remove(os.path.join(directory, "seatide.json"))
    else:
        shutil.rmtree(os.path.join(directory, "spark"))
    with pytest.raises(RestoreRefused, match="seatide.json is missing" if lost == "seatide.json" else "offsets"):
        _resume(store)


@sqlite_only
def test_a_mark_of_a_later_incarnation_is_no_evidence(leader, tmp_path):
    """A mark naming an incarnation the job never had (a directory of another run put here?): the
    count is the run's, so the empty directory is a lost checkpoint again."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store)
    _resume(store, fallback="fresh")            # incarnation 2: a fresh start for no problem at all
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _failed_checkpoint(store, 9, 0)                 # its move was made: nothing owed
    _cancel(coordinator, store)
    _unmark(directory, 9)
    with pytest.raises(RestoreRefused, match="seatide.json is missing"):
        _resume(store)


@sqlite_only
def test_a_savepoints_copy_counts_every_checkpoint_of_the_run(leader, tmp_path):
    """Only a fresh start's empty directory is excused: a savepoint's copy that lost its metadata
    after its move (cancelled before a checkpoint) is refused as before."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, savepoint_dir(directory, 7), 7, 2, kind="SAVEPOINT")
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store)
    _resume(store, savepoint_id=7)
    prepare_checkpoint(directory, 2, savepoint_dir(directory, 7), 1, time.time)
    _cancel(coordinator, store)
    os.remove(os.path.join(directory, "seatide.json"))
    with pytest.raises(RestoreRefused, match="seatide.json is missing"):
        _resume(store)


@sqlite_only
def test_a_refusal_for_want_of_a_checkpoint_names_an_unreadable_mark(leader, tmp_path):
    """A made fresh start resumed in place, cancelled, its mark then corrupted: the empty directory
    is refused (no evidence of the fresh start any more), and the message names the mark as the
    cause, not only the missing checkpoint (outside review)."""
    coordinator, store, directory = _release_fresh_start_made(leader, tmp_path, prepared=False)
    intents.resume(store, "j1", actor="t")
    _cancel(coordinator, store)
    with open(os.path.join(directory, PREPARED_MARK), "w") as handle:
        handle.write('{"incarnation": 2, "fr')
    with pytest.raises(RestoreRefused) as refused:
        _resume(store)
    assert "holds no SeaTide checkpoint" in str(refused.value)
    assert f"{PREPARED_MARK} is unreadable" in str(refused.value) and "put the mark back" in str(refused.value)
