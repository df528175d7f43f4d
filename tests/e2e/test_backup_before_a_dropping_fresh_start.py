"""A backup from before a fresh start whose save modes emptied the target (store/dropped_output.py).

Lineage 1 commits batch 0 (rows 0-299) into a LocalFile path under APPEND_DATA and dies; its
directory is backed up, then lost. The operator starts over (``--fallback fresh``) with
``data_save_mode = DROP_DATA``: the fresh start's sink prepares the target, which removes lineage 1's
files, and dies before it decides a batch. Lineage 1's backup put back was resumed before (the fresh
start "decided nothing"): it went on from batch 1, and rows 0-299 were lost for good. A fresh start
whose save modes destroyed nothing (APPEND_DATA) leaves the backup as good as it was: resumed.

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py);
the drivers are stopped by failpoints (after lineage 1's sink commit, before the fresh start's decision).
"""

from __future__ import annotations

import shutil

import pytest

from seatide import failpoints, intents
from tests.e2e.test_backup_older_than_sinks import backed_up_then_lost, refused_resume
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark

SINK = 'file_format_type = "parquet" }'


def _fresh_start_dies_before_deciding(local, tmp_path, monkeypatch, save_mode: str):
    """Lineage 1 commits batch 0 and dies; its directory, backed up, is lost; a fresh start with
    ``save_mode`` prepares the target and dies before deciding a batch; the backup is put back."""
    out = str(tmp_path / "out")
    failed, text, directory, backup = backed_up_then_lost(local, tmp_path, monkeypatch)
    monkeypatch.delitem(failpoints._POINTS, "driver.after_sink_commit")
    monkeypatch.setitem(failpoints._POINTS, "sink.before_decision", f"once:raise:{tmp_path / 'fresh-died'}")
    fresh_text = text.replace(SINK, f'file_format_type = "parquet", data_save_mode = "{save_mode}" }}')
    intents.resume(local.store, failed.job_id, text=fresh_text, fallback="fresh", actor="test")
    fresh = local.drive(failed.job_id)
    assert fresh.status == "FAILED" and "sink.before_decision" in (fresh.error or ""), fresh.error
    monkeypatch.delitem(failpoints._POINTS, "sink.before_decision")
    shutil.rmtree(directory)
    shutil.copytree(backup, directory, symlinks=True)
    return failed.job_id, out


def test_a_backup_from_before_a_fresh_start_that_dropped_its_rows_is_refused(local, tmp_path, monkeypatch):
    job_id, out = _fresh_start_dies_before_deciding(local, tmp_path, monkeypatch, "DROP_DATA")
    assert parquet_ids(out) == [], "the fresh start's DROP_DATA did not remove lineage 1's rows"
    message = refused_resume(local, job_id, out)
    assert f"job {job_id}" in message and "pipeline 1" in message, message
    assert "DROP_DATA" in message and "incarnation 2" in message and "--fallback fresh" in message, message
    assert parquet_ids(out) == []
    intents.resume(local.store, job_id, fallback="fresh", actor="test")     # the way on it names
    assert local.drive(job_id).status == "FINISHED" and parquet_ids(out) == list(range(900))


def test_a_backup_from_before_a_fresh_start_that_destroyed_nothing_is_resumed(local, tmp_path, monkeypatch):
    job_id, out = _fresh_start_dies_before_deciding(local, tmp_path, monkeypatch, "APPEND_DATA")
    assert parquet_ids(out) == list(range(300))
    intents.resume(local.store, job_id, actor="test")
    resumed = local.drive(job_id)
    assert resumed.status == "FINISHED" and parquet_ids(out) == list(range(900)), (resumed.status, resumed.error)
