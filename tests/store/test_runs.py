"""Runs: a job id's life from submission to expiry has an identity no later run shares.

Issue 21, findings 6, 7 and 8: a reused job id must not share a checkpoint directory (or a
slot, or a transaction id) with a dead run, a batch decided in one incarnation is rolled
forward in the next, and a restore from an older savepoint never reuses transaction ids.
"""

from __future__ import annotations

import json
import os
import time

from sqlalchemy import select, update

from seatide.coordinator.cleanup import apply_cleanup, decide_cleanup, read_cleanup_view
from seatide.coordinator.lease import LeaderLease
from seatide.runtime.commit_log import read_json, write_json_atomic
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.runtime.checkpoint_move import prepare_checkpoint
from tests.leader import elected
from tests.store.test_store import _attempt, _end, store, submit  # noqa: F401  (store is a fixture)


def _dirs(store) -> list[str]:
    with store.read() as conn:
        return [row.checkpoint_dir for row in conn.execute(select(s.pipelines.c.checkpoint_dir))]


def _leader(store, name: str) -> LeaderLease:
    return elected(store, name)


def _expire(store, lease: LeaderLease, view) -> None:
    apply_cleanup(store, lease.epoch, f"coordinator:{lease.node_id}", view.result, decide_cleanup(view),
                  lambda attempt: None)


def _make_checkpoint(path: str) -> None:
    """What a driver leaves in a pipeline's directory: its metadata and Spark's logs."""
    os.makedirs(os.path.join(path, "spark", "commits"), exist_ok=True)
    write_json_atomic(os.path.join(path, "seatide.json"), {"lineage": "abc", "fingerprint": "f"})


def test_a_resubmitted_job_id_never_shares_a_directory_with_its_forgotten_run(store, tmp_path):
    """A leftover directory of a dead run would be restored silently by a same-config
    resubmission (its metadata and fingerprint match): the new run must start elsewhere."""
    submit(store, tmp_path)
    [old] = _dirs(store)
    _make_checkpoint(old)
    _end(store, "j1", "CANCELED", "CLEAN")
    with store.write() as conn:      # its history expired and its rows were forgotten
        for table in (s.pipelines, s.attempts, s.job_results, s.jobs):
            conn.execute(table.delete())
    submit(store, tmp_path)
    [new] = _dirs(store)
    assert new != old and not new.startswith(old.rstrip("/") + os.sep)


def test_a_slow_leaders_stale_expiry_never_removes_a_new_runs_checkpoints(store, tmp_path):
    """The expiry's view is read, then the leader pauses; meanwhile the run is forgotten by
    the next leader and the id submitted again. The paused leader's removal must not reach
    the new run's directory (its Forget is fenced off by epoch, its rmtree was not)."""
    submit(store, tmp_path)
    _end(store, "j1", "CANCELED", "CLEAN")
    with store.write() as conn:
        run_id = conn.execute(select(s.jobs.c.run_id)).scalar()
        conn.execute(update(s.job_results).values(expires_at=0.0, run_id=run_id))
    slow = _leader(store, "slow")
    with store.read() as conn:
        result = conn.execute(select(s.job_results)).one()
    stale = read_cleanup_view(store, result)
    with store.write() as conn:       # slow lost its lease (paused); the next leader expires the run
        conn.execute(update(s.leadership).values(expires_at=0.0))
    fast = _leader(store, "fast")
    _expire(store, fast, read_cleanup_view(store, result))
    submit(store, tmp_path)
    [new] = _dirs(store)
    _make_checkpoint(new)
    try:
        _expire(store, slow, stale)
    except Exception:
        pass                           # fenced: NotLeader on its store write
    assert os.path.isfile(os.path.join(new, "seatide.json")), "the stale expiry removed the new run's checkpoint"


def test_a_batch_decided_in_one_incarnation_is_found_by_the_next(store, tmp_path):
    """Killed mid-publish, cancelled, resumed: the next incarnation must roll the decided batch
    forward (publish its manifest), never stage it again (issue 21 finding 6)."""
    submit(store, tmp_path)
    first = AttemptReporter(store, "j1", 1, _attempt(store, "j1"))
    manifest = {"publish": {"moves": [["/staged/a", "/out/a"]]}, "state": {"rows": 3}}
    first.decide_batch(1, "sink0", 4, "T_j1_1_0_abc_4", manifest)
    with store.write() as conn:       # cancelled, then resumed: incarnation 2 with its own attempt
        conn.execute(update(s.attempts).values(state="LOST"))
        conn.execute(update(s.jobs).values(incarnation=2, status="RUNNING"))
        second_id = conn.execute(s.attempts.insert().values(
            job_id="j1", incarnation=2, number=1, worker_id="w", state="RUNNING", created_at=0.0,
            kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).values(current_attempt=second_id))
    second = AttemptReporter(store, "j1", 2, second_id)
    assert second.decided_manifest(1, "sink0", "T_j1_1_0_abc_4") == ("DECIDED", manifest)
    assert [(b, t) for b, t, _ in second.unpublished_manifests(1, "sink0", "T_j1_1_0_abc_")] == \
        [(4, "T_j1_1_0_abc_4")]


def test_a_restore_from_a_savepoint_starts_a_new_lineage(tmp_path):
    """The savepoint's copy keeps the lineage its batches were committed under; the batches
    after it are planned again, maybe with other boundaries, and must not take the ids of
    batches already committed (issue 21 finding 7)."""
    savepoint = str(tmp_path / "savepoints" / "1" / "0")
    _make_checkpoint(savepoint)
    pipeline_dir = str(tmp_path / "0")
    _make_checkpoint(pipeline_dir)
    prepare_checkpoint(pipeline_dir, 2, savepoint, 1, time.time)
    restored = read_json(os.path.join(pipeline_dir, "seatide.json"))
    assert restored["fingerprint"] == "f"
    assert restored["lineage"] != "abc"
    assert json.loads(json.dumps(read_json(os.path.join(savepoint, "seatide.json"))))["lineage"] == "abc"
