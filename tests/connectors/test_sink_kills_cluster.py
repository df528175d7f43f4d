"""Real kills of a sink's driver at its commit's edges: the driver process is SIGKILLed at a
failpoint armed for its job alone; the control plane starts a new attempt, which resumes from the
checkpoint and commits each batch once. Real coordinator, worker and driver processes on a SQLite
store, shared by the module's stories (``shared_cluster``: they kill drivers only, so one
coordinator's and one worker's start, not one per sink).

- Iceberg: killed right after its first catalog commit; the next attempt finds that batch's
  snapshot and writes it not again.
- Paimon: killed between pypaimon's write of a batch and its commit (``paimon.staged``: files
  written, nothing decided), before the commit (``paimon.before_commit``), and right after Paimon's
  commit (``paimon.after_commit``: committed, not yet in the runtime's log): the batch's files are
  written again (the dead ones stay orphans no snapshot names), or the committed batch is found by
  its commit user and identifier and committed not again.
- Redis: killed right after a batch's MULTI/EXEC (``redis.applied``: the rows and the batch's
  record are in Redis, the runtime's commit log does not have it); the replay finds the record
  and pushes nothing, so a list, whose RPUSH is not idempotent, holds each row once."""

from __future__ import annotations

import json
import os

import pytest

from seatide.testing.cluster import Cluster
from seatide.testing.redis_server import PrivateRedis
from tests.connectors.iceberg_helpers import batch_snapshots, rows_of as iceberg_rows
from tests.connectors.paimon_helpers import rows_of as paimon_rows, snapshots

pytestmark = pytest.mark.cluster


def _run_killed(cluster: Cluster, job_id: str, points: str, sink: str):
    """Two batches of 250 rows into ``sink``, the job's drivers armed with ``points``; the job's
    end, which must be FINISHED."""
    cluster.arm(job_id, points)
    cluster.submit(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 3,
      job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 500, split.num = 4, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ {sink} }}
""", job_id)
    job = cluster.wait_status(job_id, {"FINISHED", "FAILED"}, timeout=600)
    assert job.status == "FINISHED", job.error_msg
    return job


def test_driver_killed_after_an_iceberg_commit_resumes_and_writes_each_row_once(shared_cluster, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    marker = str(tmp_path / "killed")
    _run_killed(shared_cluster, "iceberg-kill", f"iceberg.after_commit=once:kill:{marker}",
                f'Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = '
                f'{{ type = hadoop, warehouse = "{config["warehouse"]}" }} }}')
    assert os.path.exists(marker), "the first driver was killed after its first commit"
    assert len(shared_cluster.attempts("iceberg-kill")) >= 2
    assert [r[0] for r in iceberg_rows(config, columns=("id",))] == list(range(500))
    marks = batch_snapshots(config)
    assert len(marks) == 2 and len(set(marks)) == 2, marks


def test_drivers_killed_before_and_after_a_paimon_commit_resume_and_commit_each_batch_once(shared_cluster, tmp_path):
    wh = tmp_path / "wh"
    markers = {point: str(tmp_path / f"killed-{point}")
               for point in ("paimon.staged", "paimon.before_commit", "paimon.after_commit")}
    _run_killed(shared_cluster, "paimon-kill", ",".join(f"{p}=once:kill:{m}" for p, m in markers.items()),
                f'Paimon {{ warehouse = "{wh}", database = db, table = t }}')
    for point, marker in markers.items():
        assert os.path.exists(marker), f"a driver was killed at {point}"
    assert len(shared_cluster.attempts("paimon-kill")) >= 3
    assert [r[0] for r in paimon_rows(wh, columns=("id",))] == list(range(500))
    commits = [(user, identifier) for user, identifier, _ in snapshots(wh)]
    assert len(commits) == 2 and len(set(commits)) == 2, commits


def test_a_driver_killed_after_a_batchs_exec_resumes_and_pushes_each_row_once(shared_cluster, tmp_path):
    server = PrivateRedis(str(tmp_path / "redis"))
    marker = str(tmp_path / "killed")
    try:
        _run_killed(shared_cluster, "redis-kill", f"redis.applied=once:kill:{marker}",
                    f"Redis {{ host = \"127.0.0.1\", port = {server.port}, key = ids, data_type = list }}")
        assert os.path.exists(marker), "a driver was killed right after its EXEC"
        assert len(shared_cluster.attempts("redis-kill")) >= 2
        client = server.client()
        ids = sorted(json.loads(v)["id"] for v in client.lrange("ids", 0, -1))
        client.close()
        assert ids == list(range(500))
    finally:
        server.stop()
