"""One stuck pipeline is not hidden by a healthy one (issue 30, finding 10).

A STREAMING job of two pipelines (two source -> sink chains in one config): pipeline 2's sink
is held by a failpoint the test controls, scoped to that pipeline, after two batches;
pipeline 1 keeps committing. The stale flag and the progress watchdog judge each pipeline,
so both fire for pipeline 2 while pipeline 1's checkpoints and tasks keep coming. Before,
both read the job's newest checkpoint and the attempt's task progress, and neither fired.
Real coordinator, worker and driver processes; the warn policies, so the flags are all that
change.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.cluster import Cluster, open_gate, wait_for
from seatide.testing.jobs import streaming_job
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster

WINDOW_MS = 40000     # stale-after and progress-timeout: either pipeline's cold start fits on a loaded host


def _pipelines(cluster: Cluster, job_id: str) -> dict:
    with cluster.store.read() as conn:
        return {p.pipeline_id: p for p in conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id))}


def _events(cluster: Cluster, job_id: str, kind: str) -> list:
    return [e for e in cluster.events(job_id) if e.kind == kind]


@sqlite_only     # the decision is the store's rows alone: tests/coordinator/test_reconcile.py
def test_a_pipeline_whose_sink_hangs_is_flagged_stale_and_hung_while_the_other_commits(cluster: Cluster, tmp_path):
    out, gate = str(tmp_path / "out"), str(tmp_path / "gate")
    cluster.coordinator("c1")
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"driver.before_sink_write@2=gate:2:{gate}"})
    job = streaming_job(out, pipelines=2).replace("job.retry.times = 3", "\n  ".join([
        "job.retry.times = 3", f"checkpoint.stale-after = {WINDOW_MS}", "checkpoint.on-stale = warn",
        f"job.progress-timeout = {WINDOW_MS}", "job.on-hung = warn"]))
    cluster.submit(job, "two")
    try:
        wait_for(lambda: (_pipelines(cluster, "two")[2].last_batch_id or -1) >= 1, 240,
                 message="pipeline 2's two batches before its sink is held")
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
