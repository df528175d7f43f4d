"""A real kill: the driver process is SIGKILLed right after its first Iceberg catalog commit; the
control plane starts a new attempt, which resumes from the checkpoint, finds that batch's snapshot
and writes it not again. Real coordinator, worker and driver processes on a SQLite store."""

from __future__ import annotations

import os

import pytest

from seatide.testing.cluster import Cluster
from tests.connectors.iceberg_helpers import batch_snapshots, rows_of

pytestmark = pytest.mark.cluster


def test_driver_killed_after_an_iceberg_commit_resumes_and_writes_each_row_once(tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    marker = str(tmp_path / "killed")
    cluster = Cluster(f"sqlite:///{tmp_path}/state.db", str(tmp_path / "data"))
    try:
        cluster.coordinator("c1")
        cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"iceberg.after_commit=once:kill:{marker}"})
        cluster.submit(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 3,
      job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 500, split.num = 4, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ Iceberg {{ namespace = ns, table = t,
                  iceberg.catalog.config = {{ type = hadoop, warehouse = "{config['warehouse']}" }} }} }}
""", "iceberg-kill")
        job = cluster.wait_status("iceberg-kill", {"FINISHED", "FAILED"}, timeout=600)
        assert job.status == "FINISHED", job.error_msg
        assert os.path.exists(marker), "the first driver was killed after its first commit"
        assert len(cluster.attempts("iceberg-kill")) >= 2
    finally:
        cluster.stop_all()
    assert [r[0] for r in rows_of(config, columns=("id",))] == list(range(500))
    marks = batch_snapshots(config)
    assert len(marks) == 2 and len(set(marks)) == 2, marks
