"""PostgreSQL table -> Sql -> MariaDB table without a primary key, BATCH with checkpointing,
killed half-way and resumed: every source row arrives exactly once. Real processes, SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.cli.test_local_run import ROOT, SEATIDE, seatide
from seatide.testing.driver_processes import DriverWatch, driver_pids
from seatide.testing.cluster import Cluster, batch_gate, wait_for
from tests.databases.jobs import TablePair, assert_each_source_row_once, pg_to_mariadb_job
from tests.stores import postgresql_only

pytestmark = pytest.mark.cluster

ROWS = 5000          # 10 splits of 500 rows; the gate holds the job after 3 of them


@pytest.fixture
def tables():
    pair = TablePair(ROWS)
    yield pair
    pair.drop()


def _checkpoints(data_dir: str, job_id: str) -> int:
    """Checkpoints the job has completed; fails at once if the job ended instead."""
    from seatide.store.address import default_store_url
    from seatide.store.db import open_store
    from seatide.store.views import job_info

    store = open_store(default_store_url(data_dir))
    try:
        with store.read() as conn:
            info = job_info(conn, job_id)
    finally:
        store.dispose()
    if info is None:
        return 0
    assert info["jobStatus"] not in ("FAILED", "FINISHED", "CANCELED"), info.get("errorMsg")
    return info["checkpoint"]["completed"] or 0


# In the soak set (bash scripts/test -m soak): CI time; a killed Jdbc copy resumes in CI through tests/databases/test_multi_table_jobs.py
@pytest.mark.soak
def test_killed_local_run_resumes_and_writes_every_row_once(tmp_path, tables):
    conf = tmp_path / "job.conf"
    conf.write_text(pg_to_mariadb_job(tables))
    data_dir = str(tmp_path / "d")
    proc = subprocess.Popen([*SEATIDE, "run", str(conf), "--job-id", "pg2maria", "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, **batch_gate(str(tmp_path / "gate"), passes=3)))
    wait_for(lambda: _checkpoints(data_dir, "pg2maria") >= 3, 240, message="three batches committed")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    wait_for(lambda: driver_pids("pg2maria") == [], 15, message="the driver to die with seatide run")
    half = tables.target_ids()
    assert 0 < sum(half.values()) < ROWS and max(half.values()) == 1
    resumed = seatide("resume", "pg2maria", "--data-dir", data_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_each_source_row_once(tables)


# In the soak set (bash scripts/test -m soak): CI time; a dead worker's job moves in CI through tests/cluster/test_failure_stories.py
@pytest.mark.soak
@postgresql_only
def test_worker_killed_mid_job_the_job_finishes_on_another_worker_exactly_once(cluster: Cluster, tmp_path, tables):
    gate = str(tmp_path / "gate")
    cluster.coordinator("c1")
    w1 = cluster.worker("w1", env=batch_gate(gate, passes=3))
    cluster.submit(pg_to_mariadb_job(tables), "pg2maria")
    def committed() -> int:
        info = cluster.job_info("pg2maria")
        assert info["jobStatus"] not in ("FAILED", "FINISHED", "CANCELED"), info.get("errorMsg")
        return info["checkpoint"]["completed"] or 0

    wait_for(lambda: committed() >= 3, 240, message="three batches committed")
    with DriverWatch("pg2maria") as watch:
        w1.kill()
        wait_for(lambda: driver_pids("pg2maria") == [], 15, message="the driver to die with its worker")
        cluster.worker("w2")
        job = cluster.wait_status("pg2maria", {"FINISHED", "FAILED"}, timeout=300)
    assert job.status == "FINISHED", job.error_msg
    assert watch.max_seen <= 1
    assert any(a.worker_id == "w2" for a in cluster.attempts("pg2maria"))
    assert_each_source_row_once(tables)
