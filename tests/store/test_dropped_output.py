"""A backup from before a fresh start whose save modes destroyed its lineage's output (store/dropped_output.py).

The end-to-end story (rows 0-299 lost before, refused now) is
tests/e2e/test_backup_before_a_dropping_fresh_start.py; here, on both stores, which save-mode decisions
count: one that destroyed something (a plan), made by another lineage of the same pipeline, in an
incarnation after the put-back lineage ran. Set up as tests/store/test_decided_batches.py: the
store's and the leader's own steps, no worker, a driver's work done by calling what it calls.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from sqlalchemy import insert, select, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.decided_batches import lost_lineage, newest_decided
from seatide.store.restore import run_first_incarnation
from tests.store.test_decided_batches import _refusal, fresh_start_after_a_backup
from tests.store.test_owed_prepare import _cancel, _job, leader  # noqa: F401  leader

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)

DROPPED = {"target": "/out", "destroy": {"remove": ["/out/part-0.parquet"]}, "pipeline": 1, "lineage": "l2"}


def _save_modes_decided(store, record: dict) -> None:
    """What the door of the current incarnation's sink leaves (runtime/sink_runs.attempt_run): batch -1,
    the job's target records, under the run's key for the target."""
    job = _job(store)
    with store.write() as conn:
        conn.execute(insert(s.sink_manifests).values(
            job_id="j1", incarnation=job.incarnation, pipeline_id=0, plugin_id="targets",
            transaction_id="P_j1@0123456789abcdef", batch_id=-1, attempt_id=7, status="DECIDED",
            manifest=json.dumps(record), decided_at=time.time(), published_at=None))


def _fresh_start_decided_save_modes(leader, tmp_path, record: dict) -> tuple[object, str]:
    """Lineage l1 decided batch 0 (incarnation 1); its directory backed up; a fresh start (incarnation 2,
    lineage l2) decided ``record`` for its target and no batch, cancelled; l1's backup put back."""
    coordinator, store, directory, backup = fresh_start_after_a_backup(leader, tmp_path)
    _save_modes_decided(store, record)
    _cancel(coordinator, store)
    shutil.rmtree(directory)
    shutil.copytree(backup, directory)
    return store, directory


@both_stores
def test_a_backup_from_before_a_fresh_start_that_destroyed_its_output_is_refused(leader, tmp_path):
    store, directory = _fresh_start_decided_save_modes(leader, tmp_path, DROPPED)
    message = _refusal(store)
    assert "pipeline 1: its checkpoint directory" in message and "holds lineage l1" in message, message
    assert "fresh start of incarnation 2 (lineage l2)" in message and "target /out" in message, message
    assert "DROP_DATA" in message and "--fallback fresh" in message and "newer backup" not in message, message
    # a retry's driver asks the same (runtime/lost_directory.py)
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        decided = newest_decided(conn, job, 1, directory, run_first_incarnation(conn, job), True)
    assert "fresh start of incarnation 2" in lost_lineage(directory, decided, True)
    intents.resume(store, "j1", fallback="fresh", actor="t")
    assert _job(store).incarnation == 3


def _committed_into(store, target: str) -> None:
    """Lineage l1's decided batch names the target it published into, as a file sink's manifest does."""
    m = s.sink_manifests
    with store.write() as conn:
        conn.execute(update(m).where((m.c.job_id == "j1") & (m.c.batch_id >= 0)).values(manifest=json.dumps(
            {"publish": {"targets": {target: {"moves": []}}}, "state": {}})))


@both_stores
@pytest.mark.parametrize("record,target", [
    ({**DROPPED, "pipeline": 2, "lineage": "m1"}, "/out"),      # another pipeline emptied the target l1 wrote
    ({**DROPPED, "pipeline": 2, "lineage": "m1"}, None),        # l1's targets unknown (an older SeaTide's manifest)
    ({"target": "/out", "destroy": DROPPED["destroy"]}, "/out"),     # an earlier SeaTide's record, made after l1
    ({**DROPPED, "pipeline": 2, "lineage": "m1"}, "/out/b"),    # review 8, C: an enclosing path emptied
    ({**DROPPED, "pipeline": 2, "lineage": "m1", "target": "/new-spelling", "earlier": ["/out"]}, "/out"),
], ids=["other-pipeline-same-target", "other-pipeline-targets-unknown", "no-writer", "enclosing-path",
        "earlier-spelling"])
def test_a_backup_whose_target_another_writer_emptied_is_refused(leader, tmp_path, record, target):
    """Outside review of c33655f, F1 and F3: the record names whichever pipeline prepared the shared
    target first, or no writer at all; what counts is the target l1 committed into."""
    store, directory = _fresh_start_decided_save_modes(leader, tmp_path, record)
    if target is not None:
        _committed_into(store, target)
    message = _refusal(store)
    assert "holds lineage l1" in message and f"target {record['target']}" in message, message
    assert "DROP_DATA" in message, message
    if "pipeline" in record:
        assert "lineage m1 of pipeline 2, which writes the same target" in message, message
    else:
        assert "from an earlier SeaTide" in message, message


@both_stores
@pytest.mark.parametrize("record,target", [
    ({**DROPPED, "destroy": None}, "/out"),     # APPEND_DATA's check, or a target with nothing to destroy
    ({**DROPPED, "lineage": "l1"}, "/out"),     # the put-back lineage's own decision
    ({**DROPPED, "pipeline": 2}, "/other"),     # another pipeline's fresh start, over a target l1 never wrote
    ({"target": "/out", "destroy": DROPPED["destroy"]}, "/other"),     # an earlier SeaTide's, elsewhere
], ids=["destroyed-nothing", "same-lineage", "other-pipeline-other-target", "no-writer-other-target"])
def test_a_backup_is_resumed_when_no_later_lineage_destroyed_its_output(leader, tmp_path, record, target):
    store, _ = _fresh_start_decided_save_modes(leader, tmp_path, record)
    _committed_into(store, target)
    intents.resume(store, "j1", actor="t")
    assert _job(store).incarnation == 3


@both_stores
def test_the_fresh_starts_own_directory_is_resumed(leader, tmp_path):
    """The fresh start's own directory (lineage l2, whose preparation destroyed the output) is resumed
    plainly: it never counted on what was destroyed."""
    coordinator, store, _, _ = fresh_start_after_a_backup(leader, tmp_path)
    _save_modes_decided(store, DROPPED)
    _cancel(coordinator, store)
    intents.resume(store, "j1", actor="t")
    assert _job(store).incarnation == 3
