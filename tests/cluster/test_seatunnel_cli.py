"""`seatide-seatunnel` against a real cluster: --async, -j, -l, --metrics, -can, -s, -r, waiting,
Ctrl-C. Jobs are held mid-way with the batch gate while the test cancels or savepoints them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from seatide.testing.cluster import Cluster, batch_gate, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, written_ids
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEATUNNEL = [sys.executable, "-m", "seatide.cli.seatunnel"]


def seatunnel(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*SEATUNNEL, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _gated_cluster(cluster: Cluster, tmp_path, passes: int = 2) -> str:
    gate = str(tmp_path / "gate")
    cluster.coordinator("c1")
    cluster.worker("w1", env=batch_gate(gate, passes=passes))
    return gate


def _conf(tmp_path, out: str, **kwargs) -> str:
    path = tmp_path / "job.conf"
    path.write_text(batch_job(out, **kwargs))
    return str(path)


def _written(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["metrics"]["SinkWriteCount"]


@sqlite_only   # the flags map onto intents; the stores are covered by the intents' own tests
def test_async_submit_then_status_list_metrics_and_cancel(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    _gated_cluster(cluster, tmp_path)
    at = ["-cn", cluster.any_coordinator().url]
    submitted = seatunnel("-c", _conf(tmp_path, out, rows=2000, rows_per_batch=200), "--async", "-n", "st-async", *at)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert cluster.job(job_id).name == "st-async"
    wait_for(lambda: _written(cluster, job_id) >= 400, 180, message="two batches committed")

    status = json.loads(seatunnel("-j", job_id, *at).stdout)
    assert status["jobId"] == job_id and status["jobStatus"] == "RUNNING"
    assert [(j["jobId"], j["jobStatus"]) for j in json.loads(seatunnel("-l", *at).stdout)] == [(job_id, "RUNNING")]
    metrics = json.loads(seatunnel("--metrics", job_id, *at).stdout)
    assert metrics["SinkWriteCount"] == 400 and metrics["pipelines"][0]["rowsWritten"] == 400
    assert metrics["checkpoint"]["completed"] >= 2
    running = json.loads(seatunnel("--get_running_job_metrics", *at).stdout)
    assert [m["jobId"] for m in running] == [job_id]

    cancelled = seatunnel("-can", job_id, *at)      # held at the third batch's start until the cancel
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"{job_id} CANCELED\n"
    assert cluster.job(job_id).status == "CANCELED"
    assert_exactly(written_ids(out + "/p0"), range(400))
    again = seatunnel("-can", job_id, "no-such-job", *at)
    assert again.returncode == 1
    assert f"job {job_id}:" in again.stderr and "job no-such-job: no job with id no-such-job" in again.stderr


# In the soak set (bash scripts/test -m soak): CI time; savepoint and restore stay in CI through the REST API's test and tests/cluster/test_checkpoints.py
@pytest.mark.soak
@sqlite_only
def test_savepoint_then_restore_through_the_store_waits_for_the_end(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    gate = _gated_cluster(cluster, tmp_path)
    conf = _conf(tmp_path, out, rows=800, rows_per_batch=200)
    at = ["--store", cluster.store_url]          # no coordinator URL: straight to the store
    job_id = seatunnel("-c", conf, "--async", *at).stdout.strip()
    wait_for(lambda: _written(cluster, job_id) >= 400, 180, message="two batches committed")

    saved = seatunnel("-s", job_id, *at)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == f"{job_id} SAVEPOINT_DONE\n"
    assert_exactly(written_ids(out + "/p0"), range(400))

    open_gate(gate)
    restored = seatunnel("-r", job_id, "-c", conf, *at)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert re.search(r"Status\s+: FINISHED", restored.stdout)
    job = cluster.job(job_id)
    assert job.status == "FINISHED" and job.incarnation == 2
    assert_exactly(written_ids(out + "/p0"), range(800))
    assert seatunnel("-s", job_id, *at).returncode == 1     # it has ended: nothing to savepoint


@sqlite_only
def test_waiting_submit_exits_by_the_job_result(cluster: Cluster, tmp_path):
    cluster.coordinator("c1")
    cluster.worker("w1")
    at = ["-cn", cluster.any_coordinator().url]
    finished = seatunnel("-c", _conf(tmp_path, str(tmp_path / "out"), rows=50), *at)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert re.search(r"Status\s+: FINISHED", finished.stdout)
    assert re.search(r"Total Write Count\s+: 50\b", finished.stdout)

    failing = tmp_path / "failing.conf"
    failing.write_text(batch_job(str(tmp_path / "out2"), rows=50, retries=0).replace(
        'LocalFile { plugin_input = "t0"',
        'Assert { plugin_input = "t0", rules { row_rules = [{ rule_type = MIN_ROW, rule_value = 51 }] } }\n'
        '  LocalFile { plugin_input = "t0"'))
    failed = seatunnel("-c", str(failing), *at)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert re.search(r"Status\s+: FAILED", failed.stdout) and "FAILED" in failed.stderr.splitlines()[-1]


def _job_line(proc) -> str:
    """The job id from the follower's "Job ID (name)" line; warnings may come first (e.g. no
    coordinator leads yet when it starts following)."""
    for line in proc.stderr:
        found = re.match(r"Job (\S+) \(", line)
        if found:
            return found.group(1)
    raise AssertionError("seatide-seatunnel never named the job it follows")


@sqlite_only
# close_job = false in the soak set (CI time): CI sees the flag in the waiting submit's
# handling through the true case, and the job left RUNNING is the same code path minus the cancel.
@pytest.mark.parametrize("close_job, expected", [("true", "CANCELED"),
                                                 pytest.param("false", "RUNNING", marks=pytest.mark.soak)])
def test_ctrl_c_while_waiting_cancels_the_job_unless_close_job_false(cluster: Cluster, tmp_path, close_job,
                                                                      expected):
    _gated_cluster(cluster, tmp_path)
    proc = subprocess.Popen([*SEATUNNEL, "-c", _conf(tmp_path, str(tmp_path / "out"), rows=2000, rows_per_batch=200),
                             "-cj", close_job, "-cn", cluster.any_coordinator().url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    job_id = _job_line(proc)
    wait_for(lambda: _written(cluster, job_id) >= 400, 180, message="two batches committed")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    if expected == "CANCELED":
        assert f"cancel requested for job {job_id}" in stderr
        cluster.wait_status(job_id, "CANCELED", timeout=90)
    else:
        assert "keeps running" in stderr
        cluster.leader_has_reconciled(2.0)
        job = cluster.job(job_id)
        assert (job.desired, job.status) == ("RUN", "RUNNING")
        cluster.cancel(job_id)
