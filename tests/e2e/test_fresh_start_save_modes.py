"""Review 7: a job whose sink says DROP_DATA, started over with ``--fallback fresh``, wrote the rows
its first lineage committed a second time: the door kept one save-mode decision per job *run* and
target (``P_<run>@<target>``), and a fresh start keeps the run, so its DROP_DATA found the first
lineage's decision (made over an empty path: destroy None) and emptied nothing (1200 rows, 300
twice). A lineage a fresh start began has its save modes made anew (``P_<run>~<incarnation>``,
``runtime/sink_runs.py``), as a new submission would. No other pipeline keeps
rows in the target (store/kept_output.py would say so), so emptying it is what SeaTunnel's
DROP_DATA at a (re)start does and what promise 1 needs.

Real job in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py).
"""

from __future__ import annotations

import shutil

import pytest

from seatide import failpoints, intents
from tests.e2e.test_jobs import fake_to_parquet, parquet_ids

pytestmark = pytest.mark.spark


def test_a_fresh_start_of_a_drop_data_job_empties_the_path_and_leaves_each_row_once(local, tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    monkeypatch.setitem(failpoints._POINTS, "driver.after_sink_commit", f"once:raise:{tmp_path / 'crashed'}")
    text = fake_to_parquet(out, rows=900, split_num=6, extra_env="checkpoint.interval = 1000\n"
                           "micro-batch.max-rows = 300\njob.retry.times = 0")
    text = text.replace('file_format_type = "parquet" }', 'file_format_type = "parquet", data_save_mode = "DROP_DATA" }')
    failed = local.run(text)
    assert failed.status == "FAILED" and parquet_ids(out) == list(range(300)), failed.error
    (pipeline,) = failed.pipelines()
    shutil.rmtree(pipeline.checkpoint_dir)          # the checkpoint is lost: the operator starts over
    monkeypatch.delitem(failpoints._POINTS, "driver.after_sink_commit")
    intents.resume(local.store, failed.job_id, fallback="fresh", actor="test")
    resumed = local.drive(failed.job_id)
    ids = parquet_ids(out)
    assert resumed.status == "FINISHED", resumed.error
    assert ids == list(range(900)), f"{len(ids)} rows, {len(set(ids))} distinct, {len(ids) - len(set(ids))} twice"
