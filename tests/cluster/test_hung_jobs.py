"""Alive but stuck: a Spark task deadlocks while its driver lives and heartbeats.

A failpoint inside the task, in the executor's Python worker, holds it: FakeSource's
split reader (``source.fake.read_partition``) for checkpointed jobs, a per-row SQL function
(``tests/cluster/stall.py``, ``test.task_row``) for a plain BATCH job, whose FakeSource rows
are made in the JVM. ``job.progress-timeout`` is seconds here, set in the job's env. The
window opens once the driver has started its queries; a micro-batch job gets a longer one:
its first micro-batch still starts the Python workers of its data source after that, about
10 s before the first task completes on a loaded two-core host.
One stuck pipeline is not hidden by a healthy one (issue 30, finding 10): in a STREAMING job of
two pipelines, pipeline 2's sink is held after a batch while pipeline 1 keeps committing;
the stale flag and the progress watchdog judge each pipeline, so both fire for pipeline 2
alone (before, both read the job's newest checkpoint and the attempt's task progress, and
neither fired).
Real coordinator, worker and driver processes: the module's shared cluster (``shared_cluster``),
each test's failpoint armed for its own job alone (``Cluster.arm``).
"""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.driver_processes import driver_pids
from seatide.testing.cluster import Cluster, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, streaming_job, written_ids
from tests.cluster.test_metrics import scrape

pytestmark = pytest.mark.cluster

# The decisions are store-agnostic (tests/coordinator/test_reconcile.py covers every policy, and
# the store side of the watchdog runs on both stores in tests/store): these run on SQLite.
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


def test_plain_batch_job_whose_task_hangs_is_failed_saying_what_hung(shared_cluster: Cluster, tmp_path):
    cluster, out = shared_cluster, str(tmp_path / "out")
    cluster.arm("hung-batch", "test.task_row=hang")
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


def test_checkpointed_batch_job_whose_task_hangs_is_restarted_and_finishes_exactly_once(shared_cluster: Cluster,
                                                                                        tmp_path):
    cluster, out, marker = shared_cluster, str(tmp_path / "out"), str(tmp_path / "hung-once")
    cluster.arm("hung-checkpointed", f"source.fake.read_partition=once:hang:{marker}")
    # on-hung is left at its default: restart
    # two batches: the hang is in the first; the restart writes both
    cluster.submit(with_env(batch_job(out, rows=200, rows_per_batch=100), COLD_START_PROOF), "hung-checkpointed")
    cluster.wait_status("hung-checkpointed", "FINISHED", timeout=240)
    assert os.path.exists(marker), "the first attempt's task never reached the failpoint"
    [event] = hung_events(cluster, "hung-checkpointed")
    assert '"policy": "restart"' in event.detail
    first, second = cluster.ended_attempts("hung-checkpointed")
    assert first.state == "LOST" and first.error.startswith("job hung")
    assert second.state == "SUCCEEDED"
    assert_exactly(written_ids(out), range(200))


# In the soak set (bash scripts/test -m soak): CI time; the warn policy, like the stale-checkpoint one
@pytest.mark.soak
def test_streaming_job_whose_task_hangs_is_flagged_then_recovers_under_warn(shared_cluster: Cluster, tmp_path):
    # it leaves its stream RUNNING: shared_cluster ends it after the test
    cluster, out, gate = shared_cluster, str(tmp_path / "out"), str(tmp_path / "gate")
    coordinator = cluster.any_coordinator()
    cluster.arm("hung-stream", f"source.fake.read_partition=gate:0:{gate}")
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
def test_slow_job_whose_tasks_keep_completing_is_not_hung(shared_cluster: Cluster, tmp_path):
    cluster, out = shared_cluster, str(tmp_path / "out")
    # 16 one-row tasks of 3 s each on two cores: about 24 s of work, a task done every 1.5 s or so
    cluster.arm("slow-batch", "test.task_row=sleep:3")
    cluster.submit(stalled_batch_job(out, 16, "job.progress-timeout = 15000", "job.on-hung = fail"), "slow-batch")
    cluster.wait_status("slow-batch", "FINISHED", timeout=240)
    pipeline = pipeline_row(cluster, "slow-batch")
    assert pipeline.finished_at - pipeline.started_at > 15, "the job ran no longer than the timeout: proves nothing"
    assert hung_events(cluster, "slow-batch") == []
    [attempt] = cluster.attempts("slow-batch")
    assert attempt.tasks_done >= 8          # progress was sampled and recorded while it ran
    assert_exactly(written_ids(out), range(16))


# Two pipelines' stale-after and progress-timeout. The window opens once both pipelines' sources
# are up; it must hold pipeline 1's first micro-batch (8 s at load 12 on two cores, 2026-11-29),
# or pipeline 1 would be flagged: 30 s leaves it over 3x that under a CPU hog. The test waits one
# window for pipeline 2's flags (40 s before).
WINDOW_MS = 30000


def _pipelines(cluster: Cluster, job_id: str) -> dict:
    with cluster.store.read() as conn:
        return {p.pipeline_id: p for p in conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id))}


def _events(cluster: Cluster, job_id: str, kind: str) -> list:
    return [e for e in cluster.events(job_id) if e.kind == kind]


# the decision is the store's rows alone: tests/coordinator/test_reconcile.py
def test_a_pipeline_whose_sink_hangs_is_flagged_stale_and_hung_while_the_other_commits(shared_cluster: Cluster,
                                                                                       tmp_path):
    cluster, out, gate = shared_cluster, str(tmp_path / "out"), str(tmp_path / "gate")
    # a batch of pipeline 2 before its sink is held (one is the story; two cost CI a batch)
    cluster.arm("two", f"driver.before_sink_write@2=gate:1:{gate}")
    # a micro-batch every 3 s, not every second: the story waits a 30 s window while pipeline 1
    # commits, and each of its batches is driver CPU (pipeline 1 still commits ten times a window)
    job = streaming_job(out, pipelines=2, interval_ms=3000).replace("job.retry.times = 3", "\n  ".join([
        "job.retry.times = 3", f"checkpoint.stale-after = {WINDOW_MS}", "checkpoint.on-stale = warn",
        f"job.progress-timeout = {WINDOW_MS}", "job.on-hung = warn"]))
    cluster.submit(job, "two")
    try:
        wait_for(lambda: all(p.last_checkpoint_id is not None for p in _pipelines(cluster, "two").values()), 240,
                 message="a checkpoint of each pipeline (pipeline 2's last before its sink is held)")
        held_at = _pipelines(cluster, "two")[2].last_checkpoint_id
        first_before = _pipelines(cluster, "two")[1].last_checkpoint_id
        stale = wait_for(lambda: _events(cluster, "two", "CHECKPOINT_STALE"), WINDOW_MS / 1000 + 60,
                         message="the stale flag for pipeline 2")
        hung = wait_for(lambda: _events(cluster, "two", "JOB_HUNG"), WINDOW_MS / 1000 + 60,
                        message="the progress watchdog for pipeline 2")
        rows = _pipelines(cluster, "two")
        assert rows[2].last_checkpoint_id == held_at, "pipeline 2 committed while its sink was held"
        assert rows[1].last_checkpoint_id > first_before, "pipeline 1 stopped committing too"
        assert json.loads(stale[0].detail)["pipelines"] == [2], stale[0].detail
        assert json.loads(hung[0].detail)["pipelines"] == [2], hung[0].detail
        assert cluster.job("two").status == "RUNNING" and len(cluster.attempts("two")) == 1   # warn: flags only
        assert cluster.job_info("two")["checkpoint"]["health"] == "HUNG"
        # Pipeline 1's later batches and tasks end neither flag: only pipeline 2 moving does.
        newest = rows[1].last_checkpoint_id
        wait_for(lambda: _pipelines(cluster, "two")[1].last_checkpoint_id >= newest + 2, 60,
                 message="two more checkpoints of pipeline 1")
        flagged = cluster.job("two")
        assert flagged.stale_since is not None and flagged.hung_since is not None
        open_gate(gate)
        wait_for(lambda: _pipelines(cluster, "two")[2].last_checkpoint_id > held_at, 120,
                 message="pipeline 2's batches once its sink goes on")
        wait_for(lambda: cluster.job_info("two")["checkpoint"]["health"] in ("HEALTHY", "IDLE"), 60,
                 message="both flags to end")
    finally:
        open_gate(gate)
        cluster.cancel("two")
        cluster.wait_status("two", "CANCELED", timeout=120)
