"""A resume's checkpoint move that its incarnation never did is carried into the next one
(store/restore.py, ``owed_prepares``).

A resume only records what each pipeline's directory must become; the incarnation's driver
does it (runtime/checkpoint_move.py) and marks it done. An incarnation cancelled before its
driver ran leaves the old directory in place: a plain resume of it must do what it owed (start
over, or copy the savepoint in), never restore what is still there. The jobs here are put in
that state by the store's and the leader's own steps (submit, cancel and release, resume),
with no worker, so no driver ever runs; the store mechanism is not the subject: SQLite only.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from sqlalchemy import insert, select, update

from seatide import intents
from seatide.config.loader import load_job_text
from seatide.coordinator.service import Coordinator
from seatide.plan.dag import build_plan
from seatide.runtime.checkpoint_move import prepare_checkpoint
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from seatide.store.db import NotLeader
from seatide.store.db import open_store
from seatide.store.jobs import request_stop
from seatide.store.restore import RestoreRefused, resume_job, savepoint_dir
from tests.store.test_store import JOB, submit
from tests.stores import sqlite_only

pytestmark = sqlite_only


@pytest.fixture
def leader(store_url):
    store = open_store(store_url)
    coordinator = Coordinator(store, node_id="c-owed")
    yield coordinator, store
    store.dispose()


def _job(store):
    with store.read() as conn:
        return conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()


def _pipeline(store):
    job = _job(store)
    with store.read() as conn:
        return conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == "j1",
                                                      s.pipelines.c.incarnation == job.incarnation)).one()


def _events(store, kind: str) -> list[dict]:
    with store.read() as conn:
        return [json.loads(e.detail) for e in conn.execute(select(s.events).where(
            s.events.c.job_id == "j1", s.events.c.kind == kind).order_by(s.events.c.seq))]


def _fingerprint() -> str:
    return build_plan(load_job_text(JOB)).pipelines[0].fingerprint()


def _checkpoint(store, path: str, checkpoint_id: int, batch: int, kind: str = "CHECKPOINT",
                micro_batch: bool | None = None) -> None:
    """What a driver leaves for a committed batch: its directory's metadata and Spark's offsets log,
    and the store's record of it (a savepoint: its directory under savepoints/, pipeline 0).
    ``micro_batch``: the mode its driver records (store/batch_mode.py), by default the job's."""
    job = _job(store)
    os.makedirs(os.path.join(path, "spark", "offsets"), exist_ok=True)
    with open(os.path.join(path, "spark", "offsets", str(batch)), "w") as handle:
        handle.write(f"v1\n{{}}\n{{\"batch\": {batch}}}\n")
    mode = job.checkpoint_interval_ms is not None or job.mode == "STREAMING" if micro_batch is None else micro_batch
    write_json_atomic(os.path.join(path, "seatide.json"), {"lineage": f"l{checkpoint_id}",
                                                           "fingerprint": _fingerprint(), "micro_batch": mode})
    offsets = {"pipelines": {"1": batch}} if kind == "SAVEPOINT" else {"batch": batch}
    with store.write() as conn:
        conn.execute(insert(s.checkpoints).values(
            job_id="j1", incarnation=job.incarnation, checkpoint_id=checkpoint_id,
            pipeline_id=0 if kind == "SAVEPOINT" else 1, batch_id=batch, kind=kind, status="COMPLETED",
            created_at=time.time(), duration_ms=1, rows=0, source_offsets=json.dumps(offsets),
            fingerprint=_fingerprint(), attempt_id=1))
        if kind == "CHECKPOINT":
            conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1",
                                                   s.pipelines.c.incarnation == job.incarnation)
                         .values(last_batch_id=batch))


def _cancel(coordinator, store, release: bool = False) -> None:
    """Cancel (and release) the job through the leader's own ticks: no worker, so no driver ran."""
    request_stop(store, "j1", release=release)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        coordinator.lease.tick()
        try:
            coordinator.reconcile_all()
        except NotLeader:
            # the lease lapsed between its renewal and the step (a CI run at load 7: a step's reads
            # outlasted it): the leader's loop renews and takes the step again, and so does this one
            continue
        job = _job(store)
        if job.status == "CANCELED" and job.release in (None, "RELEASED"):
            return
        time.sleep(0.05)
    raise AssertionError(f"job not cancelled{' and released' if release else ''}: {tuple(_job(store))}")


def _resume(store, **kwargs):
    return resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={}, **kwargs)


def _released_then_resumed_fresh(leader, tmp_path):
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, directory, 1, 4)
    _cancel(coordinator, store, release=True)           # the slot is dropped: batch 4's positions are gone
    _resume(store, fallback="fresh")
    assert json.loads(_job(store).restore)["prepare"] == {"1": None}
    return coordinator, store, directory


def _released_with_savepoint_7(leader, tmp_path):
    """Savepoint 7 (batch 2) and checkpoint 8 (batch 5) taken, the job cancelled and released,
    resumed fresh: incarnation 2, whose driver has not run."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, savepoint_dir(directory, 7), 7, 2, kind="SAVEPOINT")
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store, release=True)
    _resume(store, fallback="fresh")
    return coordinator, store, directory


def test_a_fresh_start_its_incarnation_never_made_is_owed_by_the_next(leader, tmp_path):
    """Released, resumed fresh, cancelled before its driver ran: the old directory with the dropped
    slot's positions is still in place and the job is no longer marked released. A plain resume must
    start over all the same, and say it is a carried decision, not restore batch 4."""
    coordinator, store, _ = _released_then_resumed_fresh(leader, tmp_path)
    _cancel(coordinator, store)
    answer = intents.resume(store, "j1", actor="test")  # no fallback: the user chose fresh already
    job = _job(store)
    restore = json.loads(job.restore)
    assert job.incarnation == 3
    assert restore["prepare"] == {"1": None}, restore
    [fresh] = restore["fresh"]
    assert "incarnation 2" in fresh["problem"] and "released" in fresh["problem"], fresh
    assert fresh["released"] is True
    assert _pipeline(store).last_batch_id is None
    carried = _events(store, "RESTORE_FALLBACK_FRESH")[-1]
    assert "never" in carried["problem"], carried
    assert _events(store, "JOB_RESUMED")[-1]["pipelines_restored"] == []
    assert [w for w in answer.warnings if "without --fallback fresh asked again" in w], answer.warnings
    # cancelled before its driver ran again: carried again, with the first reason, not a nested one
    _cancel(coordinator, store)
    _resume(store)
    [again] = json.loads(_job(store).restore)["fresh"]
    assert "incarnation 3" in again["problem"] and again["reason"] == fresh["reason"], again
    assert again["problem"].count("incarnation") == 1, again


def test_a_fresh_start_its_incarnation_made_is_not_made_again(leader, tmp_path):
    """The normal path: the driver moved the empty directory in and checkpointed there; a plain
    resume restores the new incarnation's own checkpoint."""
    coordinator, store, directory = _released_then_resumed_fresh(leader, tmp_path)
    prepare_checkpoint(directory, 2, None, 1, time.time)     # what incarnation 2's driver does first
    _checkpoint(store, directory, 2, 0)
    _cancel(coordinator, store)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert (restore["prepare"], restore["fresh"]) == ({}, []), restore
    assert _pipeline(store).last_batch_id == 0
    assert _events(store, "JOB_RESUMED")[-1]["pipelines_restored"] == [1]


def _copy_of_savepoint_7_owed(leader, tmp_path, batch: int = 2):
    """Savepoint 7 (at ``batch``) and checkpoint 8 (batch 5) taken, the job cancelled, resumed from
    savepoint 7, cancelled again before its driver copied it in."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, savepoint_dir(directory, 7), 7, batch, kind="SAVEPOINT")
    _checkpoint(store, directory, 8, 5)
    _cancel(coordinator, store)
    _resume(store, savepoint_id=7)
    _cancel(coordinator, store)
    return coordinator, store, directory


def test_a_savepoint_copy_its_incarnation_never_made_is_owed_by_the_next(leader, tmp_path):
    """Resumed from savepoint 7 (batch 2), cancelled before its driver copied it in: the live
    directory (batch 5) is still in place. The user's last word was "from savepoint 7"."""
    coordinator, store, directory = _copy_of_savepoint_7_owed(leader, tmp_path)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert restore["prepare"] == {"1": savepoint_dir(directory, 7)}, restore
    assert "savepoint 7" in restore["from"], restore
    assert _pipeline(store).last_batch_id == 2


def test_an_owed_fresh_start_forced_by_a_release_outranks_a_savepoint(leader, tmp_path):
    """A savepoint taken before the release holds the dropped slot's positions: naming it is
    refused, so the fresh start still owed is not overruled under that savepoint's name
    (store/release_line.py); a plain resume then carries the fresh start on."""
    coordinator, store, _ = _released_with_savepoint_7(leader, tmp_path)
    _cancel(coordinator, store)
    with pytest.raises(RestoreRefused, match="savepoint 7: it was taken at incarnation 1, and the job's sources were "
                                             "released at incarnation 1"):
        _resume(store, savepoint_id=7)
    _resume(store)
    restore = json.loads(_job(store).restore)
    assert restore["prepare"] == {"1": None}, restore
    assert _pipeline(store).last_batch_id is None


def test_a_savepoint_named_now_outranks_an_owed_copy(leader, tmp_path):
    """The user's newer word: an owed savepoint copy (not a release's fresh start) gives way."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _checkpoint(store, savepoint_dir(directory, 7), 7, 2, kind="SAVEPOINT")
    _checkpoint(store, savepoint_dir(directory, 9), 9, 3, kind="SAVEPOINT")
    _cancel(coordinator, store)
    _resume(store, savepoint_id=7)
    _cancel(coordinator, store)
    _resume(store, savepoint_id=9)
    restore = json.loads(_job(store).restore)
    assert (restore["prepare"], restore["carried"]) == ({"1": savepoint_dir(directory, 9)}, []), restore
    assert _pipeline(store).last_batch_id == 3
