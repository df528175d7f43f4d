"""An owed checkpoint move is owed only on positive evidence, and a release is a line no restore
crosses (store/owed_moves.py, store/release_line.py): the review of the owed-move change.

Set up as tests/store/test_owed_prepare.py does: the store's and the leader's own steps, no
worker, so a driver's work is done by calling what it calls (``prepare_checkpoint``) or by
recording what it records (a checkpoint row). SQLite only: the store mechanism is not the subject.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from seatide import intents
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.store.restore import RestoreRefused, savepoint_dir
from seatide.store.runs import PREPARED_MARK
from tests.store.test_owed_prepare import (_cancel, _checkpoint, _copy_of_savepoint_7_owed,  # noqa: F401  leader
                                           _events, _job, _pipeline, _released_with_savepoint_7, _resume, leader)
from tests.store.test_store import submit
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _ran_after_release(leader, tmp_path):
    """Released at incarnation 1 (batch 5), resumed fresh; incarnation 2's driver made the move and
    committed batch 3 of the new branch; cancelled."""
    coordinator, store, directory = _released_with_savepoint_7(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _checkpoint(store, directory, 9, 3)
    _cancel(coordinator, store)
    return coordinator, store, directory


@pytest.mark.parametrize("fallback", [None, "fail"])
def test_a_move_made_is_not_owed_when_its_directory_cannot_be_seen(leader, tmp_path, fallback):
    """F1: the run directory is invisible to the resuming process (an NFS mount absent): incarnation 2
    recorded checkpoints, so its move was made; the resume is refused as before the change, never
    a carried fresh start that discards the live branch."""
    coordinator, store, directory = _ran_after_release(leader, tmp_path)
    run_dir = os.path.dirname(directory)
    os.rename(run_dir, run_dir + ".unmounted")
    try:
        with pytest.raises(intents.Refusal, match="is missing"):
            intents.resume(store, "j1", actor="t", fallback=fallback)
    finally:
        os.rename(run_dir + ".unmounted", run_dir)
    assert _job(store).incarnation == 2
    _resume(store)                                   # back: its own checkpoint, batch 3
    assert (json.loads(_job(store).restore)["prepare"], _pipeline(store).last_batch_id) == ({}, 3)


def test_a_move_made_is_not_owed_when_an_old_backup_is_put_back(leader, tmp_path):
    """F1/F2: the directory restored from a backup taken before the release (its mark: none, batch
    5 of the dropped slot) while incarnation 2 had run: not owed (the store has its checkpoints),
    and not restorable either: it is older than the release."""
    coordinator, store, directory = _ran_after_release(leader, tmp_path)
    os.remove(os.path.join(directory, PREPARED_MARK))
    with pytest.raises(RestoreRefused, match="release") as refused:
        _resume(store)
    assert "incarnation 1" in str(refused.value) and "fresh" in str(refused.value), refused.value


def test_a_move_made_and_no_checkpoint_yet_is_not_owed(leader, tmp_path):
    """Its driver moved the empty directory in and ran no batch: the mark is the evidence. Not a carried
    fresh start either: the empty directory is restored as it is (tests/store/test_fresh_made_empty.py)."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store, release=True)
    _resume(store, fallback="fresh")
    prepare_checkpoint(directory, 2, None, 1, time.time)
    _cancel(coordinator, store)
    _resume(store, fallback="fresh")
    restore = json.loads(_job(store).restore)
    assert (restore["prepare"], restore["fresh"]) == ({}, []), restore
    assert not [c for c in restore["carried"] if "never" in c], restore


@pytest.mark.parametrize("named", [7, 10])
def test_a_savepoint_older_than_the_release_is_refused(leader, tmp_path, named):
    """F2/F4: the release's fresh move was made (incarnation 2 ran); savepoint 7 was taken before the
    release and holds the dropped slot's positions: refused, saying what, why and how. Savepoint 9
    (incarnation 2's, after the release) is fine."""
    coordinator, store, directory = _ran_after_release(leader, tmp_path)
    # incarnation 2 took savepoint 10 (the store records it under its incarnation) before it was cancelled
    _checkpoint(store, savepoint_dir(directory, 10), 10, 3, kind="SAVEPOINT")
    if named == 10:
        _resume(store, savepoint_id=10)
        assert json.loads(_job(store).restore)["prepare"] == {"1": savepoint_dir(directory, 10)}
        return
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", savepoint_id=7, actor="t")
    text = str(refused.value)
    assert "savepoint 7" in text and "released" in text and "incarnation 1" in text, text
    assert "--fallback fresh" in text and "later savepoint" in text, text
    assert _job(store).incarnation == 2


def test_a_savepoint_older_than_the_release_is_refused_while_the_fresh_start_is_owed(leader, tmp_path):
    """F4: the release's fresh start was never made; naming savepoint 7 (before the release) is
    refused, not silently overruled under a 'savepoint 7' label."""
    coordinator, store, _ = _released_with_savepoint_7(leader, tmp_path)
    _cancel(coordinator, store)
    with pytest.raises(intents.Refusal, match="savepoint 7: .*released"):
        intents.resume(store, "j1", savepoint_id=7, actor="t")
    assert [e["restored_from"] for e in _events(store, "JOB_RESUMED")] == ["j1@1"]


def test_the_release_line_survives_further_resumes(leader, tmp_path):
    """The release's incarnation is carried from resume to resume: two resumes later, savepoint 7
    is still older than it."""
    coordinator, store, directory = _ran_after_release(leader, tmp_path)
    for _ in range(2):
        _resume(store)               # from incarnation 2's own checkpoint: no move
        _cancel(coordinator, store)
    with pytest.raises(RestoreRefused, match="released"):
        _resume(store, savepoint_id=7)


def _fresh_for_a_missing_directory(leader, tmp_path):
    """Checkpoint 8 (batch 5); the directory away when resumed with --fallback fresh."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store)
    os.rename(directory, directory + ".away")
    _resume(store, fallback="fresh")
    return coordinator, store, directory


def test_a_fresh_start_no_release_forced_is_re_planned(leader, tmp_path):
    """F3: --fallback fresh for a transient problem (the directory briefly away), cancelled before
    its driver ran, the problem fixed: --fallback fail restores the intact checkpoint, and says so."""
    coordinator, store, directory = _fresh_for_a_missing_directory(leader, tmp_path)
    os.rename(directory + ".away", directory)
    _cancel(coordinator, store)
    answer = intents.resume(store, "j1", actor="t", fallback="fail")
    restore = json.loads(_job(store).restore)
    assert (restore["prepare"], restore["fresh"]) == ({}, []), restore
    assert _pipeline(store).last_batch_id == 5
    assert [w for w in answer.warnings if "re-planned" in w and "incarnation 2" in w], answer.warnings


def test_a_fresh_start_no_release_forced_with_its_problem_still_there_is_refused(leader, tmp_path):
    coordinator, store, _ = _fresh_for_a_missing_directory(leader, tmp_path)
    _cancel(coordinator, store)
    with pytest.raises(RestoreRefused, match="is missing"):
        _resume(store, fallback="fail")
    _resume(store, fallback="fresh")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None}


def test_an_owed_copy_of_a_vanished_savepoint_is_refused(leader, tmp_path):
    """F5: savepoint 7 held the pipeline at no batch (-1); its directory vanished before the owed
    copy: refused as naming it is, naming it, not a driver crash-looping on copytree."""
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path, batch=-1)
    shutil.rmtree(savepoint_dir(directory, 7))
    with pytest.raises(RestoreRefused) as refused:
        _resume(store)
    text = str(refused.value)
    assert "savepoint 7" in text and "is missing" in text and "incarnation 2" in text, text


@pytest.mark.parametrize("content", ["", "{\"incarnation\": ", "[1]", "null"])
def test_an_unreadable_mark_is_a_refusal(leader, tmp_path, content):
    """F6: a corrupt mark is a refusal naming the file and what to do, never a traceback."""
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path)
    mark = os.path.join(directory, PREPARED_MARK)
    with open(mark, "w") as handle:
        handle.write(content)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", actor="t")
    assert mark in str(refused.value) and "remove" in str(refused.value), refused.value
