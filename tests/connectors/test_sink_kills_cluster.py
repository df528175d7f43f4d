"""Real kills of a sink's driver at its commit's edges: the driver process is SIGKILLed at a
failpoint armed for its job alone; the control plane starts a new attempt, which resumes from the
checkpoint and commits each batch once. Real coordinator, worker and driver processes on a SQLite
store (``shared_cluster``).

- Iceberg: killed right after its first catalog commit; the next attempt finds that batch's
  snapshot and writes it not again.
- Paimon: killed between pypaimon's write of a batch and its commit (``paimon.staged``: files
  written, nothing decided), before the commit (``paimon.before_commit``), and right after Paimon's
  commit (``paimon.after_commit``: committed, not yet in the runtime's log): the batch's files are
  written again (the dead ones stay orphans no snapshot names), or the committed batch is found by
  its commit user and identifier and committed not again.
- Redis: killed right after a batch's MULTI/EXEC (``redis.applied``: the rows and the batch's
  record are in Redis, the runtime's commit log does not have it); the replay finds the record
  and pushes nothing, so a list, whose RPUSH is not idempotent, holds each row once.

CI time: the three sinks are three pipelines of one job (their queries run side by side in each
driver), not three jobs. Every kill needs a driver of its own, the job's last attempt one more:
five kills, six driver JVM starts, where three jobs started eight (a cold start is ~9 CPU-s on
two cores). A kill at one sink's point also ends the other pipelines wherever they are, as any
driver's death does; each sink's assertions are the ones its own job had."""

from __future__ import annotations

import json
import os

import pytest

from seatide.testing.redis_server import PrivateRedis
from tests.connectors.iceberg_helpers import batch_snapshots, rows_of as iceberg_rows
from tests.connectors.paimon_helpers import rows_of as paimon_rows, snapshots

pytestmark = pytest.mark.cluster

PAIMON_POINTS = ("paimon.staged", "paimon.before_commit", "paimon.after_commit")


def _three_sinks_job(iceberg_warehouse: str, paimon_warehouse: str, redis_port: int) -> str:
    """Two batches of 250 rows (ids 0-499) into each sink, a pipeline per sink; retries enough
    for the five kills, none waited for."""
    def source(name: str) -> str:
        return f"""
  FakeSource {{ plugin_output = "{name}", row.num = 500, split.num = 4, sequence.field = "id",
               schema = {{ fields {{ id = bigint, name = string }} }} }}"""
    return f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 6,
      job.retry.interval.seconds = 0 }}
source {{{source("ice")}{source("pai")}{source("red")}
}}
sink {{
  Iceberg {{ plugin_input = "ice", namespace = ns, table = t,
            iceberg.catalog.config = {{ type = hadoop, warehouse = "{iceberg_warehouse}" }} }}
  Paimon {{ plugin_input = "pai", warehouse = "{paimon_warehouse}", database = db, table = t }}
  Redis {{ plugin_input = "red", host = "127.0.0.1", port = {redis_port}, key = ids, data_type = list }}
}}
"""


def test_drivers_killed_at_each_sinks_commit_edges_resume_and_write_each_batch_once(shared_cluster, tmp_path):
    cluster = shared_cluster
    iceberg = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    paimon_wh = tmp_path / "wh"
    markers = {point: str(tmp_path / f"killed-{point}")
               for point in ("iceberg.after_commit", *PAIMON_POINTS, "redis.applied")}
    server = PrivateRedis(str(tmp_path / "redis"))
    try:
        cluster.arm("sink-kills", ",".join(f"{p}=once:kill:{m}" for p, m in markers.items()))
        cluster.submit(_three_sinks_job(iceberg["warehouse"], str(paimon_wh), server.port), "sink-kills")
        # a safety net, not a measure: six cold drivers at load 20 (stop 46's loaded run) outlasted 600 s
        job = cluster.wait_status("sink-kills", {"FINISHED", "FAILED"}, timeout=1200)
        assert job.status == "FINISHED", job.error_msg
        for point, marker in markers.items():
            assert os.path.exists(marker), f"a driver was killed at {point}"
        # Paimon's three points are met one after another (a driver killed at one meets no
        # later one): three drivers killed, and the one that finished
        assert len(cluster.attempts("sink-kills")) >= 4

        # Iceberg: the batch committed just before the kill was not written again
        assert [r[0] for r in iceberg_rows(iceberg, columns=("id",))] == list(range(500))
        marks = batch_snapshots(iceberg)
        assert len(marks) == 2 and len(set(marks)) == 2, marks

        # Paimon: each batch one commit, whether its driver died before or after it
        assert [r[0] for r in paimon_rows(paimon_wh, columns=("id",))] == list(range(500))
        commits = [(user, identifier) for user, identifier, _ in snapshots(paimon_wh)]
        assert len(commits) == 2 and len(set(commits)) == 2, commits
        pending = paimon_wh / "db.db" / ".t.seatide-pending"     # each batch's record went with its commit
        assert not pending.exists() or not os.listdir(pending), os.listdir(pending)

        # Redis: the replay of the batch applied before the kill pushed nothing
        client = server.client()
        ids = sorted(json.loads(v)["id"] for v in client.lrange("ids", 0, -1))
        client.close()
        assert ids == list(range(500))
    finally:
        server.stop()
