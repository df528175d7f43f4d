"""A pipeline's checkpoint directory put back to an earlier state after its sink committed a batch
that no checkpoint row records yet (outside review, F1).

The window: the sink's decision of batch N is in the store and its files are published; the
driver dies before the store's checkpoint row for N. An operator then puts the directory back as
a backup held it earlier, and the job goes on: by a resume (a new incarnation) or by the same
incarnation's next attempt (a retry). The promise: batch N is never written to the sink twice.

* A backup that holds the directory's metadata (``seatide.json``: the same lineage) and Spark's plan
  of N (``offsets/N``) replays N under the transaction id it was decided under: the store's decision
  is found, nothing is written again. One without that plan (taken after the directory's preparation)
  is refused (outside review 2, F1: tests/e2e/test_backup_older_than_sinks.py).
* A backup from before the pipeline's first start (no directory, or one with no SeaTide checkpoint)
  would start a new lineage, whose batch 0 has a transaction id no decision has: the batch would
  be written again. No checkpoint row says the directory should hold one, but the sink's decision
  says as much: the resume refuses it, and so does the retry's driver.

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py);
the driver is stopped in the window by a failpoint that raises right after the sink's commit.
"""

from __future__ import annotations

import os
import shutil

import pytest

from seatide import failpoints, intents
from tests.e2e.test_jobs import fake_to_parquet, parquet_ids

pytestmark = pytest.mark.spark

ROWS = 600          # two batches of 300: batch 0 is decided and published when the driver dies


def _put_back(directory: str, state: str) -> None:
    """The directory as a backup taken earlier held it."""
    if state == "at the commit":
        return               # the backup taken in the window itself: what the dead driver left
    if state == "before the first start":
        shutil.rmtree(directory)
        return
    if state == "made, nothing written in it":
        shutil.rmtree(directory)
        os.makedirs(directory)
        return
    # "prepared, no batch planned": the driver had written seatide.json, Spark nothing yet
    for name in os.listdir(directory):
        if name != "seatide.json":
            path = os.path.join(directory, name)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def _job_text(out: str, retries: int) -> str:
    return fake_to_parquet(out, rows=ROWS, split_num=6, extra_env="checkpoint.interval = 1000\n"
                           f"micro-batch.max-rows = 300\njob.retry.times = {retries}")


def _die_after_batch_0s_commit(monkeypatch, tmp_path) -> str:
    crashed = str(tmp_path / "crashed")
    monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{crashed}")
    return crashed


SAFE = ["at the commit"]
# What the refusal says: a new lineage writes the batch again; a plan made again may split it otherwise
# (tests/e2e/test_backup_older_than_sinks.py shows the rows it lost or wrote twice before)
LOST = {"before the first start": "written to its sinks again", "made, nothing written in it": "written to its sinks again",
        "prepared, no batch planned": "offsets/0 is missing"}


@pytest.mark.parametrize("state", SAFE + list(LOST))
def test_a_resume_never_writes_a_decided_batch_again(local, tmp_path, monkeypatch, state):
    out = str(tmp_path / "out")
    crashed = _die_after_batch_0s_commit(monkeypatch, tmp_path)
    failed = local.run(_job_text(out, retries=0))
    assert failed.status == "FAILED" and os.path.exists(crashed), failed.error
    assert failed.checkpoints() == [], "batch 0 was recorded: the driver did not die in the window"
    written = parquet_ids(out)
    assert written == list(range(300)), "batch 0 was not published before the driver died"
    (pipeline,) = failed.pipelines()
    _put_back(pipeline.checkpoint_dir, state)
    if state in LOST:
        with pytest.raises(intents.Refusal) as refused:
            intents.resume(local.store, failed.job_id, actor="test")
        message = str(refused.value)
        assert f"job {failed.job_id}" in message and "pipeline 1" in message, message
        assert "batch 0" in message and LOST[state] in message, message
        assert "--fallback fresh" in message and "newer backup" in message, message
        assert parquet_ids(out) == written
        return
    intents.resume(local.store, failed.job_id, actor="test")
    resumed = local.drive(failed.job_id)
    assert resumed.status == "FINISHED", resumed.error
    assert parquet_ids(out) == list(range(ROWS)), "a row written twice, or lost"


@pytest.mark.parametrize("state", SAFE + list(LOST))
def test_a_retry_never_writes_a_decided_batch_again(local, tmp_path, monkeypatch, state):
    out = str(tmp_path / "out")
    crashed = _die_after_batch_0s_commit(monkeypatch, tmp_path)
    attempts = []

    def put_back_before_the_retry(attempt):
        attempts.append(attempt.attempt_id)
        if len(attempts) == 2:
            assert os.path.exists(crashed) and parquet_ids(out) == list(range(300))
            (pipeline,) = local_run_pipelines(local, attempt.job_id)
            _put_back(pipeline.checkpoint_dir, state)

    run = local.run(_job_text(out, retries=1), before_attempt=put_back_before_the_retry)
    assert len(attempts) == 2, run.error
    if state in LOST:
        ids = parquet_ids(out)
        assert ids == list(range(300)), f"{len(ids)} rows, {len(set(ids))} distinct: batch 0 written again"
        assert run.status == "FAILED", run.status
        assert LOST[state] in run.error and "--fallback fresh" in run.error, run.error
        return
    assert run.status == "FINISHED", run.error
    assert parquet_ids(out) == list(range(ROWS)), "a row written twice, or lost"


def local_run_pipelines(local, job_id: str) -> list:
    from sqlalchemy import select

    from seatide.store import schema as s

    with local.store.read() as conn:
        return list(conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id)))
