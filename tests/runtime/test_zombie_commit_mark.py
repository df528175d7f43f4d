"""A replaced driver's commit mark, written after its pipeline's checkpoint was moved under it,
never marks a batch of the resumed branch as done (review 30, F3).

A driver holds its pipeline's checkpoint directory by path. When a resume puts a savepoint's copy
at that path (``runtime/checkpoint_move.py``), a driver of the old incarnation that was frozen
between its batch's decision and its publish (a paused host) writes its commit mark, when it
thaws, into the new branch's directory. The new branch plans its batches again, under its own
lineage; its batch of the same number must still be written.
"""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pytest

from seatide.runtime.commit_log import SinkCommitLog, adopt_marks, read_json, write_json_atomic
from seatide.runtime.driver import _prepare_checkpoint
from seatide.runtime.spark_checkpoint import claim, last_committed_batch
from seatide.store.db import AttemptFenced, open_store
from tests.contract.harness import Pipeline, Zombie, rows
from tests.contract.systems import LocalFileSystem


@pytest.fixture
def store(store_url):
    st = open_store(store_url)
    yield st
    st.dispose()


def lineage_of(directory: str) -> str:
    return read_json(os.path.join(directory, "seatide.json"))["lineage"]


def test_a_zombies_commit_mark_in_the_moved_directory_does_not_skip_the_new_branchs_batch(
        spark, store, tmp_path, monkeypatch):
    system = LocalFileSystem(str(tmp_path / "out"))
    target = system.new_target()
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    live = os.path.join(pipeline.workdir, pipeline.job_id)     # the pipeline's checkpoint directory
    write_json_atomic(os.path.join(live, "seatide.json"), {"lineage": "L1"})
    old = pipeline.attempt()
    run = pipeline.open(old, system.sink(target), spark, lineage=lineage_of(live))
    run.write(rows(spark, [1]), 0)
    run.write(rows(spark, [2]), 1)
    savepoint = str(tmp_path / "savepoint")
    shutil.copytree(live, savepoint)           # a savepoint after batch 1
    # The old attempt decides batch 2 and freezes before its publish.
    zombie = Zombie("sink.after_decision", str(tmp_path / "gate"), monkeypatch,
                    lambda: run.write(rows(spark, [3]), 2))
    # Declared lost; the job is resumed from the savepoint: a new attempt moves its copy in place.
    new = pipeline.attempt()
    _prepare_checkpoint(new, SimpleNamespace(pipeline_id=1, checkpoint_dir=live), 2, savepoint)
    branch = lineage_of(live)
    assert branch != "L1"
    # The host thaws: the zombie publishes what it decided, and marks it by the path it holds.
    # (Its bookkeeping after the mark, a store write, is fenced.)
    outcome = zombie.release()
    assert "result" in outcome or isinstance(outcome.get("error"), AttemptFenced), outcome
    assert os.path.exists(os.path.join(live, "sinks", "sink[0]", "commit", "2.json"))
    # The new branch plans batch 2 again, with its own rows: they are written, not skipped.
    resumed = pipeline.open(new, system.sink(target), spark, lineage=branch)
    assert resumed.write(rows(spark, [1]), 1).replayed          # the savepoint's batches stay done
    result = resumed.write(rows(spark, [30]), 2)
    assert not result.replayed, (
        f"batch 2 of the resumed branch was taken as done by the zombie's mark "
        f"{json.dumps(read_json(os.path.join(live, 'sinks', 'sink[0]', 'commit', '2.json')))}")
    assert 30 in system.read(target)


def test_another_lineages_marks_give_no_state_are_pruned_and_are_not_adopted_at_a_branch(tmp_path):
    root = str(tmp_path / "sinks" / "sink[0]")
    ours, zombie = SinkCommitLog(root, "L1"), SinkCommitLog(root, "L0")
    write_json_atomic(os.path.join(root, "commit", "3.json"), {"rows": 3})     # written before marks had a lineage
    ours.commit(4, {"rows": 4})
    zombie.commit(5, {"rows": 50})
    assert ours.committed(3) == {"rows": 3} and ours.committed(5) is None
    assert ours.latest_state() == {"rows": 4}            # never the other lineage's state
    adopt_marks(str(tmp_path), "L1", "L2")
    branch = SinkCommitLog(root, "L2")
    assert [branch.committed(b) for b in (3, 4, 5)] == [{"rows": 3}, {"rows": 4}, None]
    branch.prune(keep_from=9)
    assert branch.batch_ids() == [4]                     # the branch's newest stays: it carries the state


def test_a_zombies_spark_writes_in_the_moved_directory_are_not_the_new_branchs_checkpoint(store, tmp_path):
    """The same zombie's Spark query writes its checkpoint by path too: ``<pipeline>/spark.attempt-<its
    id>``, made afresh in the moved directory. Claimed by its replacement before any of its own, that
    partial tree of the old branch (batch 5 committed) would be taken for the pipeline's checkpoint,
    and the batches after the savepoint skipped."""
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    live = os.path.join(pipeline.workdir, pipeline.job_id)
    savepoint = str(tmp_path / "savepoint")       # as copy_pipeline_directory makes one: a plain ``spark``
    write_json_atomic(os.path.join(savepoint, "seatide.json"), {"lineage": "L1"})
    for log in ("offsets", "commits"):
        for batch in (0, 1):
            write_json_atomic(os.path.join(savepoint, "spark", log, str(batch)), {})
    zombie, new = pipeline.attempt(), pipeline.attempt()
    _prepare_checkpoint(new, SimpleNamespace(pipeline_id=1, checkpoint_dir=live), 2, savepoint)
    for log in ("offsets", "commits"):          # the zombie's query, thawed, goes on by the path it holds
        write_json_atomic(os.path.join(live, f"spark.attempt-{zombie.attempt_id}", log, "5"), {})
    claimed = claim(live, new.attempt_id)
    assert last_committed_batch(claimed) == 1, f"the replacement resumed from the zombie's batch {last_committed_batch(claimed)}"


def test_a_copy_holding_attempt_directories_is_restored_from_its_newest(store, tmp_path):
    """A savepoint copy of another make (attempt directories, not a plain ``spark``) is brought to a
    plain ``spark`` when it is moved in, so the rule above never sets its own checkpoint aside."""
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    live = os.path.join(pipeline.workdir, pipeline.job_id)
    savepoint = str(tmp_path / "savepoint")
    write_json_atomic(os.path.join(savepoint, "seatide.json"), {"lineage": "L1"})
    for attempt, batches in ((1, (0,)), (2, (0, 1, 2))):
        for batch in batches:
            write_json_atomic(os.path.join(savepoint, f"spark.attempt-{attempt}", "commits", str(batch)), {})
    new = pipeline.attempt()
    _prepare_checkpoint(new, SimpleNamespace(pipeline_id=1, checkpoint_dir=live), 2, savepoint)
    assert last_committed_batch(claim(live, new.attempt_id)) == 2
