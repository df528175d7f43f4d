"""Alive but stuck: a Spark task deadlocks while its driver lives and heartbeats.

A failpoint inside the task, in the executor's Python worker, holds it: FakeSource's
split reader (``source.fake.read_partition``) for checkpointed jobs, a per-row SQL function
(``tests/cluster/stall.py``, ``test.task_row``) for a plain BATCH job, whose FakeSource rows
are made in the JVM. ``job.progress-timeout`` is seconds here, set in the job's env. The
window opens once the driver has started its queries; a micro-batch job gets a longer one:
its first micro-batch still starts the Python workers of its data source after that, about
10 s before the first task completes on a loaded two-core host.
Real coordinator, worker and driver processes.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.driver_processes import driver_pids
from seatide.testing.cluster import Cluster, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, streaming_job, written_ids
from tests.cluster.test_metrics import scrape
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster

# The decisions are store-agnostic (tests/coordinator/test_reconcile.py covers every policy);
# the plain BATCH story runs on both stores, the others on SQLite to keep CI short.
COLD_START_PROOF = "job.progress-timeout = 20000"     # micro-batch jobs: see the module's doc

STALL = os.path.join(os.path.dirname(__file__), "stall.py")


def with_env(job: str, *lines: str) -> str:
    return job.replace("env {", "env {\n  " + "\n  ".join(lines), 1)


def stalled_batch_job(out: str, rows: int, *env: str) -> str:
    """Plain BATCH, one row per Spark task, each row through ``stall`` inside its task."""
    job = batch_job(out, rows=rows, retries=1).replace("split.num = 4", f"split.num = {rows}")
    job = job.replace("select seq + 0 as id", "select stall(seq) as id")
    return with_env(job, f'sql.udfs = ["{STALL}:stall"]', *env)


def hung_events(cluster: Cluster, job_id: str) -> list:
    return [e for e in cluster.events(job_id) if e.kind == "JOB_HUNG"]


def pipeline_row(cluster: Cluster, job_id: str):
    with cluster.store.read() as conn:
        return conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id)).one()


@sqlite_only   # the store side of the watchdog is tested on both stores in tests/store
def test_plain_batch_job_whose_task_hangs_is_failed_saying_what_hung(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": "test.task_row=hang"})
    cluster.submit(stalled_batch_job(out, 8, "job.progress-timeout = 4000", "job.on-hung = fail"), "hung-batch")
    job = cluster.wait_status("hung-batch", "FAILED", timeout=180)
    assert job.error_msg.startswith("job hung: pipeline 1 of attempt "), job.error_msg
    assert "job.progress-timeout 4 s, on-hung fail" in job.error_msg
    [event] = hung_events(cluster, "hung-batch")
    assert '"policy": "fail"' in event.detail
    [attempt] = cluster.attempts("hung-batch")     # failed at once: no retry for a hang under fail
    assert attempt.state == "LOST" and attempt.error.startswith("job hung")
    # alive but stuck: flagged 4 s after the driver started its pipeline (its first progress
    # report, of no task), while its heartbeat (1 s interval, 6 s timeout here) was still fresh
    assert attempt.tasks_done == 0
    assert event.at - attempt.progress_at >= 4
    assert event.at - attempt.heartbeat_at < 3
    wait_for(lambda: driver_pids("hung-batch") == [], 30, message="the hung driver to be killed")
    assert written_ids(out) == {}


@sqlite_only
def test_checkpointed_batch_job_whose_task_hangs_is_restarted_and_finishes_exactly_once(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    marker = str(tmp_path / "hung-once")
    cluster.coordinator("c1")
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"source.fake.read_partition=once:hang:{marker}"})
    # on-hung is left at its default: restart
    cluster.submit(with_env(batch_job(out, rows=400, rows_per_batch=100), COLD_START_PROOF), "hung-checkpointed")
    cluster.wait_status("hung-checkpointed", "FINISHED", timeout=240)
    assert os.path.exists(marker), "the first attempt's task never reached the failpoint"
    [event] = hung_events(cluster, "hung-checkpointed")
    assert '"policy": "restart"' in event.detail
    first, second = cluster.ended_attempts("hung-checkpointed")
    assert first.state == "LOST" and first.error.startswith("job hung")
    assert second.state == "SUCCEEDED"
    assert_exactly(written_ids(out), range(400))


# In the soak set (bash scripts/test -m soak): CI time; the warn policy, like the stale-checkpoint one
@pytest.mark.soak
@sqlite_only
def test_streaming_job_whose_task_hangs_is_flagged_then_recovers_under_warn(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    gate = str(tmp_path / "gate")
    coordinator = cluster.coordinator("c1")
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"source.fake.read_partition=gate:0:{gate}"})
    cluster.submit(with_env(streaming_job(out), COLD_START_PROOF, "job.on-hung = warn"), "hung-stream")
    wait_for(lambda: hung_events(cluster, "hung-stream"), 180, message="the JOB_HUNG event")
    # warn: flagged, and nothing else changes
    assert cluster.job("hung-stream").status == "RUNNING"
    assert len(cluster.attempts("hung-stream")) == 1
    checkpoint = cluster.job_info("hung-stream")["checkpoint"]
    assert checkpoint["health"] == "HUNG" and checkpoint["hungSince"] is not None
    assert checkpoint["lastCheckpointId"] is None
    metrics = scrape(coordinator.url)
    assert metrics.value("seatide_job_checkpoint_health", job_id="hung-stream", health="HUNG") == 1
    assert metrics.value("seatide_job_checkpoint_health", job_id="hung-stream", health="HEALTHY") == 0
    # The task goes on: progress ends the flag, the same attempt keeps checkpointing.
    open_gate(gate)
    wait_for(lambda: (cluster.job_info("hung-stream")["checkpoint"]["lastCheckpointId"] or 0) >= 2, 120,
             message="checkpoints after the task went on")
    wait_for(lambda: cluster.job_info("hung-stream")["checkpoint"]["health"] in ("HEALTHY", "IDLE"), 30,
             message="the HUNG flag to clear")
    assert cluster.job("hung-stream").hung_since is None
    assert len(cluster.attempts("hung-stream")) == 1
    assert len(hung_events(cluster, "hung-stream")) == 1


# In the soak set (bash scripts/test -m soak): CI time; a false alarm would also fail the other hung-job tests' counts
@pytest.mark.soak
@sqlite_only
def test_slow_job_whose_tasks_keep_completing_is_not_hung(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    # 16 one-row tasks of 3 s each on two cores: about 24 s of work, a task done every 1.5 s or so
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": "test.task_row=sleep:3"})
    cluster.submit(stalled_batch_job(out, 16, "job.progress-timeout = 15000", "job.on-hung = fail"), "slow-batch")
    cluster.wait_status("slow-batch", "FINISHED", timeout=240)
    pipeline = pipeline_row(cluster, "slow-batch")
    assert pipeline.finished_at - pipeline.started_at > 15, "the job ran no longer than the timeout: proves nothing"
    assert hung_events(cluster, "slow-batch") == []
    [attempt] = cluster.attempts("slow-batch")
    assert attempt.tasks_done >= 8          # progress was sampled and recorded while it ran
    assert_exactly(written_ids(out), range(16))

