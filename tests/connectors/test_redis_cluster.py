"""A real kill: the driver process is SIGKILLed right after a batch's MULTI/EXEC (``redis.applied``:
the rows and the batch's record are in Redis, the runtime's commit log does not have it). The
control plane starts a new attempt, which resumes from the checkpoint and replays the batch: it
finds the record and pushes nothing, so a list, whose RPUSH is not idempotent, holds each row once.
Real coordinator, worker and driver processes, a SQLite store, a private redis-server."""

from __future__ import annotations

import json
import os

import pytest

from seatide.testing.cluster import Cluster
from seatide.testing.redis_server import PrivateRedis

pytestmark = pytest.mark.cluster


def test_a_driver_killed_after_a_batchs_exec_resumes_and_pushes_each_row_once(tmp_path):
    server = PrivateRedis(str(tmp_path / "redis"))
    marker = str(tmp_path / "killed")
    cluster = Cluster(f"sqlite:///{tmp_path}/state.db", str(tmp_path / "data"))
    try:
        cluster.coordinator("c1")
        cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"redis.applied=once:kill:{marker}"})
        cluster.submit(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 3,
      job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 500, split.num = 4, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ Redis {{ host = "127.0.0.1", port = {server.port}, key = ids, data_type = list }} }}
""", "redis-kill")
        job = cluster.wait_status("redis-kill", {"FINISHED", "FAILED"}, timeout=600)
        assert job.status == "FINISHED", job.error_msg
        assert os.path.exists(marker), "a driver was killed right after its EXEC"
        assert len(cluster.attempts("redis-kill")) >= 2
        client = server.client()
        ids = sorted(json.loads(v)["id"] for v in client.lrange("ids", 0, -1))
        client.close()
        assert ids == list(range(500))
    finally:
        cluster.stop_all()
        server.stop()
