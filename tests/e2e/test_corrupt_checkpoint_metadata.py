"""A retry's driver on a hand-edited or corrupt ``seatide.json`` (review 4, F3): the attempt fails with
the file named and what is wrong with it (store/checkpoint_metadata.py, runtime/lost_directory.py),
never a traceback, and retries no more (only the operator can fix it). The first attempt fails
before any sink write, so no decided batch makes ``lost_lineage`` look at the file first.

A real job in the shared SparkSession on a real SQLite store."""

from __future__ import annotations

import os

import pytest

from seatide import failpoints
from tests.e2e.test_backup_put_back import local_run_pipelines
from tests.e2e.test_jobs import fake_to_parquet

pytestmark = pytest.mark.spark


def test_a_retry_refuses_a_corrupt_metadata_file_naming_it(local, tmp_path, monkeypatch):
    monkeypatch.setitem(failpoints._POINTS, "driver.before_sink_write", f"once:raise:{tmp_path / 'crashed'}")
    attempts, files = [], []

    def corrupt(attempt):
        attempts.append(attempt)
        if len(attempts) == 2:
            (pipeline,) = local_run_pipelines(local, attempt.job_id)
            files.append(os.path.join(pipeline.checkpoint_dir, "seatide.json"))
            with open(files[0], "w") as handle:
                handle.write('[1, {"fingerprint": "x"}]')

    job = fake_to_parquet(str(tmp_path / "out"), rows=60, extra_env="checkpoint.interval = 1000\njob.retry.times = 2")
    run = local.run(job, before_attempt=corrupt)
    assert run.status == "FAILED" and len(attempts) == 2, (run.status, len(attempts), run.error)
    assert f"{files[0]} is unreadable (not a JSON object but a list)" in run.error, run.error
    assert "Traceback" not in run.error and "AttributeError" not in run.error, run.error
