"""The second review of the owed-move change (store/owed_moves.py, store/release_line.py): an
unreadable mark must not block the escapes its refusal suggests, the release line must outlive
event retention, and a directory the resume cannot see is refused when what it holds matters.

Set up as tests/store/test_owed_prepare.py does: the store's and the leader's own steps, no
worker, so a driver's work is done by calling what it calls (``prepare_checkpoint``). SQLite only:
the store mechanism is not the subject.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from sqlalchemy import select, update

from seatide import failpoints, intents
from seatide.coordinator.retention import RetentionRules, Slice, prune_events
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.db import NotLeader
from seatide.store.restore import savepoint_dir
from seatide.store.runs import PREPARED_MARK, prepared_for
from tests.store.test_owed_prepare import (_cancel, _checkpoint, _copy_of_savepoint_7_owed,  # noqa: F401  leader
                                           _fingerprint, _job, _pipeline, _released_then_resumed_fresh, _resume,
                                           leader)
from tests.store.test_owed_review import _fresh_for_a_missing_directory
from tests.store.test_store import submit
from tests.stores import sqlite_only

pytestmark = sqlite_only


def _corrupt(directory):
    """A mark cut short (a storage error, a truncated write by hand): empty."""
    with open(os.path.join(directory, PREPARED_MARK), "w") as handle:
        handle.write("")


def test_an_unreadable_mark_is_a_problem_the_fresh_fallback_covers(leader, tmp_path):
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path)
    _corrupt(directory)
    intents.resume(store, "j1", actor="t", fallback="fresh")
    restore = json.loads(_job(store).restore)
    assert restore["prepare"] == {"1": None}, restore
    assert PREPARED_MARK in restore["fresh"][0]["problem"], restore


def test_an_unreadable_mark_is_not_read_when_a_savepoint_is_named(leader, tmp_path):
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path)
    _corrupt(directory)
    intents.resume(store, "j1", actor="t", savepoint_id=7)
    assert json.loads(_job(store).restore)["prepare"] == {"1": savepoint_dir(directory, 7)}


def test_an_unreadable_mark_does_not_block_a_released_jobs_fresh_start(leader, tmp_path):
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 1, 4)
    _corrupt(directory)
    _cancel(coordinator, store, release=True)
    intents.resume(store, "j1", actor="t", fallback="fresh")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None}


@pytest.mark.parametrize("content", ["", "{\"incarnation\": ", "[1]"])
def test_the_drivers_move_takes_an_unreadable_mark_as_not_this_incarnations(leader, tmp_path, content):
    """Nothing owed, a savepoint named: the driver's move sets the directory aside and marks the copy."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, savepoint_dir(directory, 7), 7, 2, kind="SAVEPOINT")
    _checkpoint(store, directory, 8, 5)
    with open(os.path.join(directory, PREPARED_MARK), "w") as handle:
        handle.write(content)
    _cancel(coordinator, store)
    _resume(store, savepoint_id=7)
    done = prepare_checkpoint(directory, 2, savepoint_dir(directory, 7), 1, time.time)
    assert done is not None and done["set_aside"] and prepared_for(directory) == 2, done


def _legacy_restore(store):
    """``jobs.restore`` as a resume before 4f682af recorded it: no release line, no 'released' flag."""
    r = json.loads(_job(store).restore)
    r.pop("release_incarnation", None)
    r.pop("carried", None)
    for f in r["fresh"]:
        f.pop("released", None)
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(restore=json.dumps(r)))


def _prune_every_event_it_may(coordinator, store):
    # The prune is fenced by the lease (2 s): under load a pause between the renewal and the
    # prune let it lapse (NotLeader, once in a loaded fast tier). A leader's loop renews and takes
    # the step again on its next tick; so does this, with a deadline.
    deadline = time.monotonic() + 60
    while True:
        coordinator.lease.tick()
        try:
            prune_events(store, coordinator.lease.epoch, time.time() + 365 * 86400,
                         RetentionRules(events_per_job=1, events_days=0), Slice(5.0))
            break
        except NotLeader:
            if time.monotonic() > deadline:
                raise
    with store.read() as conn:
        kept = list(conn.execute(select(s.events.c.kind).where(s.events.c.job_id == "j1")
                                 .order_by(s.events.c.seq)).scalars())
    assert kept == ["SOURCES_RELEASED", "JOB_CANCELED"], kept       # the release and the newest one


def test_the_release_event_is_never_pruned_so_an_older_resumes_line_holds(leader, tmp_path):
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    _legacy_restore(store)
    _cancel(coordinator, store)
    _prune_every_event_it_may(coordinator, store)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", actor="t")
    text = str(refused.value)
    # the cause is the fresh start incarnation 2 owed and never made, not a backup put back
    assert "released at incarnation 1" in text and "incarnation 2" in text and "backup" not in text, text


def _never_checkpointed_released_and_resumed_fresh(leader, tmp_path):
    """Batch 0 planned (Spark's offsets/0: the slot's start), never completed (no checkpoint row);
    cancelled and released; resumed fresh; cancelled before that incarnation's driver ran."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    os.makedirs(os.path.join(directory, "spark", "offsets"))
    with open(os.path.join(directory, "spark", "offsets", "0"), "w") as handle:
        handle.write("v1\n{}\n{}\n")
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "l0", "fingerprint": _fingerprint()})
    _cancel(coordinator, store, release=True)
    _resume(store, fallback="fresh")
    _cancel(coordinator, store)
    return coordinator, store, directory


@pytest.mark.parametrize("fallback", [None, "fresh"])
def test_a_directory_out_of_sight_is_refused_when_a_move_or_a_release_decides_it(leader, tmp_path, fallback):
    coordinator, store, directory = _never_checkpointed_released_and_resumed_fresh(leader, tmp_path)
    run_dir = os.path.dirname(directory)
    os.rename(run_dir, run_dir + ".unmounted")
    try:
        if fallback is None:
            with pytest.raises(intents.Refusal) as refused:
                intents.resume(store, "j1", actor="t")
            assert "not visible" in str(refused.value) and "mount" in str(refused.value), refused.value
            assert _job(store).incarnation == 2
        else:
            intents.resume(store, "j1", actor="t", fallback="fresh")
            assert json.loads(_job(store).restore)["prepare"] == {"1": None}
    finally:
        os.rename(run_dir + ".unmounted", run_dir)


def test_a_resumes_answer_is_its_own_when_another_resume_follows_at_once(leader, tmp_path, monkeypatch):
    """Resume A carries incarnation 2's owed copy; before its answer is built, the job is cancelled
    and resumed again (B carries incarnation 3's). A's warnings are A's, never B's."""
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path)
    go = tmp_path / "go"
    monkeypatch.setitem(failpoints._POINTS, "intents.resume_recorded", f"gate:0:{go}")
    answers = {}
    resume_a = threading.Thread(target=lambda: answers.setdefault("a", intents.resume(store, "j1", actor="a")))
    resume_a.start()
    deadline = time.monotonic() + 30
    while _job(store).incarnation != 3:
        assert time.monotonic() < deadline, "resume A never recorded its incarnation"
        time.sleep(0.05)
    monkeypatch.delitem(failpoints._POINTS, "intents.resume_recorded")
    _cancel(coordinator, store)
    b = intents.resume(store, "j1", actor="b")
    go.touch()
    resume_a.join(30)
    assert [w for w in b.warnings if "incarnation 3" in w], b.warnings
    assert [w for w in answers["a"].warnings if "incarnation 2" in w], answers["a"].warnings
    assert not [w for w in answers["a"].warnings if "incarnation 3" in w], answers["a"].warnings


def test_a_re_planned_fresh_start_keeps_the_batch_after_two_fresh_starts_that_never_ran(leader, tmp_path):
    """Batch 5 checkpointed; the directory out of sight for two resumes with --fallback fresh, neither
    of whose drivers ran; back in place, a plain resume restores it at batch 5, not at no batch."""
    coordinator, store, directory = _fresh_for_a_missing_directory(leader, tmp_path)
    _cancel(coordinator, store)
    _resume(store, fallback="fresh")
    _cancel(coordinator, store)
    os.rename(directory + ".away", directory)
    answer = intents.resume(store, "j1", actor="t")
    assert (json.loads(_job(store).restore)["prepare"], _pipeline(store).last_batch_id) == ({}, 5)
    assert [w for w in answer.warnings if "re-planned" in w and "incarnation 3" in w], answer.warnings
