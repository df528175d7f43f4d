"""A resume from a savepoint in another execution mode than the savepoint was taken in.

``store/batch_mode.py`` refuses a resume that changes the mode under batches committed in place. A
savepoint's copy is a new lineage, so no decision of the old one counts against it; but the rows
the savepoint's batches wrote are in the sinks all the same. The copy is only a continuation when
the resumed driver reads the savepoint's source positions, which only a checkpointed (micro-batch)
run does.

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py);
the job is held after batch 0 by a gate until the stop with a savepoint arrives.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from seatide import failpoints, intents
from seatide.store.batch_mode import MODE_KEY
from seatide.store.restore import latest_savepoint_id, savepoint_dir
from tests.e2e.test_backup_older_than_sinks import _stop_with_savepoint_after, refused_resume
from tests.e2e.test_jobs import fake_to_parquet, parquet_ids

pytestmark = pytest.mark.spark

_CHECKPOINTED = "checkpoint.interval = 1000\nmicro-batch.max-rows = 300\njob.retry.times = 0"


def _stopped_with_a_savepoint_after_batch_0(local, tmp_path, monkeypatch, out: str):
    """900 rows in micro-batches of 300: batch 0 (ids 0-299) committed, then a savepoint and stop."""
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start", f"gate:1:{tmp_path / 'gate'}")
    monkeypatch.setattr(failpoints, "_HITS", {})
    first = local.run(fake_to_parquet(out, rows=900, split_num=6, extra_env=_CHECKPOINTED),
                      stop_after=_stop_with_savepoint_after(out, 300))
    assert first.status == "SAVEPOINT_DONE" and parquet_ids(out) == list(range(300)), (first.status, first.error)
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start")
    return first


def test_a_checkpointed_savepoint_resumed_plain_is_refused(local, tmp_path, monkeypatch):
    """Resumed from the savepoint with checkpoint.interval left out: the plain run does not read the
    savepoint's offsets; it reads all 900 rows into the copy's new lineage as its batch 0."""
    out = str(tmp_path / "out")
    first = _stopped_with_a_savepoint_after_batch_0(local, tmp_path, monkeypatch, out)
    plain = fake_to_parquet(out, rows=900, split_num=6, extra_env="micro-batch.max-rows = 300\njob.retry.times = 0")
    savepoint = latest_savepoint_id(local.store, first.job_id)
    message = refused_resume(local, first.job_id, out, text=plain, savepoint_id=savepoint)
    assert f"savepoint {savepoint}" in message and "ran in micro-batches" in message, message
    assert "without checkpoint.interval" in message, message
    assert "original env" in message and "--fallback fresh" in message, message
    assert parquet_ids(out) == list(range(300))
    # its own mode goes on exactly once
    intents.resume(local.store, first.job_id, savepoint_id=savepoint, actor="test")
    resumed = local.drive(first.job_id)
    assert resumed.status == "FINISHED" and parquet_ids(out) == list(range(900)), (resumed.status, resumed.error)


def test_a_savepoint_taken_before_the_mode_was_recorded_is_judged_by_its_offsets_log(local, tmp_path, monkeypatch):
    """A savepoint from before seatide.json recorded the mode (d3e4d89): its Spark offsets log shows it
    ran in micro-batches, and the plain resume is refused the same way."""
    out = str(tmp_path / "out")
    first = _stopped_with_a_savepoint_after_batch_0(local, tmp_path, monkeypatch, out)
    savepoint = latest_savepoint_id(local.store, first.job_id)
    (pipeline,) = first.pipelines()
    copy = os.path.join(savepoint_dir(pipeline.checkpoint_dir, savepoint), "seatide.json")
    with open(copy) as handle:
        meta = json.load(handle)
    assert meta.pop(MODE_KEY) is True, meta
    with open(copy, "w") as handle:
        json.dump(meta, handle)
    plain = fake_to_parquet(out, rows=900, split_num=6, extra_env="micro-batch.max-rows = 300\njob.retry.times = 0")
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(local.store, first.job_id, text=plain, savepoint_id=savepoint, actor="test")
    message = str(refused.value)
    assert f"savepoint {savepoint} was taken while it ran in micro-batches" in message, message
    assert "--fallback fresh" in message, message
    assert parquet_ids(out) == list(range(300))


def test_an_older_directory_without_sparks_plan_is_not_resumed_plain(local, tmp_path, monkeypatch):
    """Review 5, F1: batch 0 committed in micro-batches; the directory in place is put back from a
    backup of the previous release taken before its first plan (no mode recorded, an empty Spark
    offsets log). Nothing in it tells the mode; the store's env of the incarnation that committed
    does. Resumed plain, the one plain batch 0 was skipped as committed: ids 300-899 never written,
    FINISHED."""
    out = str(tmp_path / "out")
    first = _stopped_with_a_savepoint_after_batch_0(local, tmp_path, monkeypatch, out)
    (pipeline,) = first.pipelines()
    path = os.path.join(pipeline.checkpoint_dir, "seatide.json")
    with open(path) as handle:
        meta = json.load(handle)
    assert meta.pop(MODE_KEY) is True, meta
    with open(path, "w") as handle:
        json.dump(meta, handle)
    for name in os.listdir(pipeline.checkpoint_dir):      # its Spark checkpoints (a link names the current one)
        spark = os.path.join(pipeline.checkpoint_dir, name)
        if name.startswith("spark"):
            os.remove(spark) if os.path.islink(spark) else shutil.rmtree(spark)
    os.makedirs(os.path.join(pipeline.checkpoint_dir, "spark", "offsets"))      # Spark's log, no plan in it yet
    plain = fake_to_parquet(out, rows=900, split_num=6, extra_env="micro-batch.max-rows = 300\njob.retry.times = 0")
    message = refused_resume(local, first.job_id, out, text=plain)
    assert "pipeline 1: it ran in micro-batches" in message and "original env" in message, message
    assert "--fallback fresh" in message and "newer backup" not in message, message
    assert parquet_ids(out) == list(range(300))
