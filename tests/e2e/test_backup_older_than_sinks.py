"""A checkpoint directory put back that is older than what its sinks committed (outside review 2).

tests/e2e/test_backup_put_back.py covers a directory without its metadata (``seatide.json``). These
directories hold it, and are still older than the sinks' output (``store/decided_batches.py``):

* F1: the lineage, but not Spark's plan (``offsets/N``) of the newest batch N the sinks decided.
  Spark plans N again with other boundaries (its input grew, ``micro-batch.max-rows`` changed); the
  sinks skip the new N as decided: rows lost or written twice. Refused by the resume and the retry.
* F2: a backup of the lineage before a ``--fallback fresh``, whose successor committed batches.
* F4: a savepoint's copy made again by a retry, after the first copy's branch committed a batch.

And F5, beside them: an intact directory resumed with a config its source's offsets cannot follow.

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py);
a driver is stopped right after a sink's commit by a failpoint, a job held by a gate.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from seatide import failpoints, intents
from seatide.store.restore import latest_savepoint_id
from tests.e2e.test_backup_put_back import _job_text, _put_back, local_run_pipelines
from tests.e2e.test_jobs import fake_to_parquet, parquet_ids

pytestmark = pytest.mark.spark


def _die_after_a_sink_commit(monkeypatch, tmp_path) -> str:
    crashed = str(tmp_path / "crashed")
    monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{crashed}")
    return crashed


def _json_files(directory: str, **files: range) -> None:
    os.makedirs(directory, exist_ok=True)
    for name, ids in files.items():
        with open(os.path.join(directory, f"{name}.json"), "w") as handle:
            handle.writelines(json.dumps({"id": i}) + "\n" for i in ids)


def _files_job(src: str, out: str, retries: int) -> str:
    return f"""
env {{ job.mode = BATCH
  parallelism = 1
  job.retry.interval.seconds = 0
  checkpoint.interval = 1000
  job.retry.times = {retries} }}
source {{ LocalFile {{ plugin_output = "in", path = "{src}", file_format_type = "json",
                      schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ plugin_input = "in", path = "{out}", file_format_type = "parquet" }} }}
"""


def _assert_refused_as_older(message: str, job_id: str, *, why: str) -> None:
    assert f"{job_id}" in message and "pipeline 1" in message, message
    assert why in message, message
    assert "newer backup" in message and "--fallback fresh" in message, message


def test_a_resume_refuses_a_backup_without_the_decided_batchs_plan(local, tmp_path, monkeypatch):
    """Batch 0 (rows 0-299) decided, the driver died; the directory put back as its driver had
    prepared it, before Spark planned batch 0; resumed with max-rows 150. Accepted before: Spark planned
    0-149 as batch 0 (skipped: decided), 150-299 as batch 1, ...: 767 rows for 600, 167 twice."""
    out = str(tmp_path / "out")
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    failed = local.run(_job_text(out, retries=0))
    assert failed.status == "FAILED" and failed.checkpoints() == [], failed.error
    assert parquet_ids(out) == list(range(300))
    (pipeline,) = failed.pipelines()
    _put_back(pipeline.checkpoint_dir, "prepared, no batch planned")
    text = _job_text(out, retries=0).replace("micro-batch.max-rows = 300", "micro-batch.max-rows = 150")
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(local.store, failed.job_id, text=text, actor="test")
    _assert_refused_as_older(str(refused.value), failed.job_id, why="offsets/0 is missing")
    assert parquet_ids(out) == list(range(300))


def test_a_retry_refuses_a_backup_without_the_decided_batchs_plan(local, tmp_path, monkeypatch):
    """The same on a retry's driver, with no config change: new files arrived after batch 0 (a.json,
    b.json) was decided. Accepted before: batch 0 planned again took every file, skipped as
    decided: the job FINISHED with the 200 new rows missing."""
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    _json_files(src, a=range(0, 100), b=range(100, 200))
    crashed = _die_after_a_sink_commit(monkeypatch, tmp_path)
    attempts = []

    def files_arrive_and_backup_put_back(attempt):
        attempts.append(attempt)
        if len(attempts) == 2:
            assert os.path.exists(crashed) and parquet_ids(out) == list(range(200))
            _json_files(src, c=range(200, 300), d=range(300, 400))
            (pipeline,) = local_run_pipelines(local, attempt.job_id)
            _put_back(pipeline.checkpoint_dir, "prepared, no batch planned")

    run = local.run(_files_job(src, out, retries=1), before_attempt=files_arrive_and_backup_put_back)
    assert len(attempts) == 2 and run.status == "FAILED", (run.status, run.error)
    _assert_refused_as_older(run.error, run.job_id, why="offsets/0 is missing")
    assert parquet_ids(out) == list(range(200))


def test_a_backup_of_the_lineage_before_a_fresh_start_is_refused(local, tmp_path, monkeypatch):
    """Lineage 1 decides batch 0 and dies; its directory is backed up, then lost; the operator starts
    over (--fallback fresh): lineage 2 decides batches 0 and 1 and dies. Lineage 1's backup put back
    was resumed before, and wrote lineage 2's batch 1 (ids 300-599) again."""
    out = str(tmp_path / "out")
    failed, _, _, backup = backed_up_then_lost(local, tmp_path, monkeypatch)
    intents.resume(local.store, failed.job_id, fallback="fresh", actor="test")
    # lineage 2 writes batch 0 as its own (a fresh start's output is its own), decides batch 1, dies
    second = _fresh_lineage_dies_after_batch_1(local, failed.job_id, monkeypatch)
    (fresh,) = [p for p in second.pipelines() if p.incarnation == 2]
    written = parquet_ids(out)
    shutil.rmtree(fresh.checkpoint_dir)
    shutil.copytree(backup, fresh.checkpoint_dir, symlinks=True)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(local.store, failed.job_id, actor="test")
    _assert_refused_as_older(str(refused.value), failed.job_id, why="last committed batches under lineage")
    assert parquet_ids(out) == written


def backed_up_then_lost(local, tmp_path, monkeypatch):
    """Lineage 1 commits batch 0 (rows 0-299 of 900, into tmp_path/out) and dies; its directory is
    backed up, then lost. (The failed run, its job text, the directory, the backup.)"""
    out = str(tmp_path / "out")
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    text = fake_to_parquet(out, rows=900, split_num=6, extra_env="checkpoint.interval = 1000\n"
                           "micro-batch.max-rows = 300\njob.retry.times = 0")
    failed = local.run(text)
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(300)), failed.error
    (pipeline,) = failed.pipelines()
    backup = str(tmp_path / "backup")
    shutil.copytree(pipeline.checkpoint_dir, backup, symlinks=True)
    shutil.rmtree(pipeline.checkpoint_dir)
    return failed, text, pipeline.checkpoint_dir, backup


def _fresh_lineage_dies_after_batch_1(local, job_id: str, monkeypatch):
    """Drive the fresh start until its sink committed batch 1, then fail its attempt there."""
    from seatide.runtime import pipeline_run

    monkeypatch.delitem(failpoints._POINTS, "driver.after_sink_commit")
    original = pipeline_run.PipelineRun._write_sinks

    def dies_after_batch_1(self, sinks, batch_id):
        rows = original(self, sinks, batch_id)
        if batch_id == 1:
            raise RuntimeError("the driver dies after batch 1's sink commit")
        return rows
    monkeypatch.setattr(pipeline_run.PipelineRun, "_write_sinks", dies_after_batch_1)
    try:
        second = local.drive(job_id)
    finally:
        monkeypatch.setattr(pipeline_run.PipelineRun, "_write_sinks", original)
    assert second.status == "FAILED" and "batch 1's sink commit" in (second.error or ""), second.error
    return second


def test_a_retry_refuses_a_savepoints_copy_made_again_after_its_branch_committed(local, tmp_path, monkeypatch):
    """Stopped with a savepoint after batch 0; resumed from it: attempt 1 copies it in (a new lineage),
    decides batch 1 and dies before its checkpoint row; the directory is lost. Attempt 2 copied the
    savepoint again under another new lineage and wrote batch 1 (ids 300-599) a second time."""
    out = str(tmp_path / "out")
    text = fake_to_parquet(out, rows=900, split_num=6, extra_env="checkpoint.interval = 1000\n"
                           "micro-batch.max-rows = 300\njob.retry.times = 1")
    # batch 0 commits; batch 1 is held at its start until the stop arrives
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start", f"gate:1:{tmp_path / 'gate'}")
    monkeypatch.setattr(failpoints, "_HITS", {})
    first = local.run(text, stop_after=_stop_with_savepoint_after(out, 300))
    assert first.status == "SAVEPOINT_DONE" and parquet_ids(out) == list(range(300)), (first.status, first.error)
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start")
    crashed = _die_after_a_sink_commit(monkeypatch, tmp_path)
    intents.resume(local.store, first.job_id, savepoint_id=latest_savepoint_id(local.store, first.job_id),
                   actor="test")
    attempts = []

    def directory_lost_before_the_retry(attempt):
        attempts.append(attempt)
        if len(attempts) == 2:
            assert os.path.exists(crashed) and parquet_ids(out) == list(range(600))
            (pipeline,) = [p for p in local_run_pipelines(local, attempt.job_id) if p.incarnation == 2]
            shutil.rmtree(pipeline.checkpoint_dir)

    run = local.drive(first.job_id, before_attempt=directory_lost_before_the_retry)
    assert len(attempts) == 2 and run.status == "FAILED", (run.status, run.error)
    _assert_refused_as_older(run.error, run.job_id, why="last committed batches under lineage")
    assert parquet_ids(out) == list(range(600)), "batch 1 written again by the savepoint's second copy"


def refused_resume(local, job_id: str, out: str, **resume) -> str:
    """The refusal of ``seatide resume``; a resume accepted instead is driven, and the test fails
    saying how it ended and which rows it left in ``out``."""
    try:
        intents.resume(local.store, job_id, actor="test", **resume)
    except intents.Refusal as refused:
        return str(refused)
    resumed, ids = local.drive(job_id), parquet_ids(out)
    pytest.fail(f"resumed: {resumed.status} {resumed.error} rows {len(ids)} distinct {len(set(ids))}")


def _stop_with_savepoint_after(out: str, rows: int):
    import time

    from seatide.intents import stop as request_stop

    def stop(store, job_id):
        deadline = time.time() + 120
        while time.time() < deadline and len(parquet_ids(out) if os.path.isdir(out) else []) < rows:
            time.sleep(0.1)
        request_stop(store, job_id, savepoint=True, actor="test")
    return stop


def test_a_resume_with_another_split_layout_fails_with_the_sources_message(local, tmp_path, monkeypatch):
    """Review 2, F5: the directory intact, the job resumed with another micro-batch.max-rows, which
    FakeSource's offsets cannot follow. It failed before with Spark's Python traceback as its error."""
    out = str(tmp_path / "out")
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    failed = local.run(_job_text(out, retries=0))
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(300)), failed.error
    text = _job_text(out, retries=2).replace("micro-batch.max-rows = 300", "micro-batch.max-rows = 150")
    intents.resume(local.store, failed.job_id, text=text, actor="test")
    resumed = local.drive(failed.job_id)
    assert resumed.status == "FAILED" and len(resumed.exit_codes) == 1, (resumed.status, resumed.exit_codes)   # no retry
    assert resumed.error.startswith("FakeSource: the checkpoint was written with split layout"), resumed.error
    assert [p.status for p in resumed.pipelines() if p.incarnation == 2] == ["FAILED"]      # which pipeline: its row says
    assert "--fallback fresh" in resumed.error and "Traceback" not in resumed.error, resumed.error
    assert parquet_ids(out) == list(range(300))


def test_a_resume_in_another_execution_mode_is_refused(local, tmp_path, monkeypatch):
    """Review 3, F1: micro-batches of 300 rows, batch 0 (rows 0-299) decided, the driver died; resumed
    with the interval left out. Accepted before: the plain run wrote all 600 rows as batch 0, which the
    sink skipped as decided: FINISHED with rows 300-599 never written."""
    out = str(tmp_path / "out")
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    failed = local.run(_job_text(out, retries=0))
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(300)), failed.error
    plain = _job_text(out, retries=0).replace("checkpoint.interval = 1000", "")
    message = refused_resume(local, failed.job_id, out, text=plain)
    assert "ran in micro-batches" in message and "without checkpoint.interval" in message, message
    assert "original env" in message and "--fallback fresh" in message and "newer backup" not in message, message
    assert parquet_ids(out) == list(range(300))


def test_a_plain_runs_directory_resumed_in_micro_batches_is_refused_as_a_mode_change(local, tmp_path, monkeypatch):
    """Review 3, F2: a plain batch decided its one batch 0 (every row), then died; resumed with an
    interval, Spark would plan a batch 0 of 300 rows, skipped as decided. Refused before, but as a
    backup "taken before batch 0 was planned", which no backup would cure."""
    out = str(tmp_path / "out")
    _die_after_a_sink_commit(monkeypatch, tmp_path)
    plain = _job_text(out, retries=0).replace("checkpoint.interval = 1000", "")
    failed = local.run(plain)
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(600)), failed.error
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(local.store, failed.job_id, text=_job_text(out, retries=0), actor="test")
    message = str(refused.value)
    assert "ran as one plain batch" in message and "with checkpoint.interval" in message, message
    assert "newer backup" not in message and "--fallback fresh" in message, message
    intents.resume(local.store, failed.job_id, text=plain, actor="test")     # its own mode: resumed
    assert local.drive(failed.job_id).status == "FINISHED" and parquet_ids(out) == list(range(600))
