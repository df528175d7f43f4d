"""Review 5, F1-F3: a checkpoint written before the mode was recorded (no "micro_batch" in
seatide.json, no start records) and resumed in the other execution mode. The store's own evidence
(a batch above 0; the env of the incarnation that decided last) and the directory's (Spark's plan),
each checked even when the other is silent, refuse the change naming it (store/batch_mode.py)."""

from __future__ import annotations

import os

from seatide import intents
from seatide.runtime.commit_log import write_json_atomic
from seatide.store.decided_batches import Decided, lost_lineage
from tests.store.test_decided_batches import (CHECKPOINTED, _cancel, _decided_then_cancelled, _pipeline, _planned,
                                              _prepared, _refusal, _refusal_of, both_stores)
from tests.store.test_owed_prepare import _job, leader  # noqa: F401  leader
from tests.store.test_store import submit


def _older(tmp_path, planned: int | None) -> str:
    """A directory of the previous release: its lineage, no mode, Spark's plan up to ``planned``."""
    directory = str(tmp_path / "1")
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "l1"})
    if planned is not None:
        _planned(directory, planned)
    return directory


def test_a_batch_above_0_proves_micro_batches_without_sparks_plan(tmp_path):
    """F1: a backup from before its first plan, resumed plain, skipped batches 1..5 and FINISHED."""
    directory = _older(tmp_path, None)
    refusal = lost_lineage(directory, Decided(batch=5, lineage="l1", checkpointed=5, micro_batch=False))
    assert refusal is not None and "it ran in micro-batches" in refusal and "up to 5" in refusal, refusal
    assert "original env" in refusal, refusal
    # the same mode is refused as the old backup it is, as before
    refusal = lost_lineage(directory, Decided(batch=5, lineage="l1", checkpointed=5, micro_batch=True))
    assert "offsets/5 is missing" in refusal, refusal
    assert lost_lineage(_older(tmp_path / "b", 5), Decided(5, "l1", 5, micro_batch=True)) is None


def test_sparks_plan_proves_micro_batches_when_the_store_decided_nothing(tmp_path):
    """F2: a Jdbc sink committed batch 0 in its own DB before any checkpoint row (no start records
    then): nothing in the store, but offsets/0 says micro-batches, which a plain resume would skip."""
    directory = _older(tmp_path, 0)
    refusal = lost_lineage(directory, None, micro_batch=False)
    assert refusal is not None and "it ran in micro-batches" in refusal, refusal
    assert "may have committed" in refusal and "original env" in refusal, refusal
    assert lost_lineage(directory, None, micro_batch=True) is None          # its own mode
    assert lost_lineage(_older(tmp_path / "b", None), None, micro_batch=False) is None     # nothing planned
    assert lost_lineage(str(tmp_path / "none"), None, micro_batch=False) is None


@both_stores
def test_an_older_micro_batch_directory_with_no_decision_is_not_resumed_plain(leader, tmp_path):
    """F2 through ``seatide resume``: the submitted job is plain, the directory holds Spark's plan."""
    coordinator, store = leader
    submit(store, tmp_path)
    directory = _pipeline(store).checkpoint_dir
    _prepared(directory)
    _planned(directory, 0)
    _cancel(coordinator, store)
    message = _refusal(store)
    assert "pipeline 1: " in message and "it ran in micro-batches" in message, message
    assert "--fallback fresh" in message, message
    intents.resume(store, "j1", text=CHECKPOINTED, actor="t")      # its original mode
    assert _job(store).incarnation == 2


@both_stores
def test_a_plain_run_resumed_in_micro_batches_is_refused_as_a_mode_change(leader, tmp_path):
    """F3: the previous release's plain run decided batch 0; resumed with checkpoint.interval it was
    refused as "a backup taken before batch 0 was planned": the previous incarnation's env says why."""
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    message = _refusal_of(store, CHECKPOINTED)
    assert "pipeline 1: it ran as one plain batch" in message and "original env" in message, message
    assert "newer backup" not in message and "offsets/0" not in message, message
    intents.resume(store, "j1", actor="t")       # its own mode
    assert _job(store).incarnation == 2
