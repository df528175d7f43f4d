"""Real kills: the driver process is SIGKILLed between pypaimon's write of a batch and its commit
(``paimon.staged``: files written, nothing decided), and the next one right after Paimon's commit
(``paimon.after_commit``: committed, not yet in the runtime's log). Each time the control plane
starts a new attempt, which resumes from the checkpoint: the batch's files are written again (the
dead ones stay orphans no snapshot names), or the committed batch is found by its commit user and
identifier and committed not again. Real coordinator, worker and driver processes, a SQLite store;
one job meets both kills (one cluster start, not two)."""

from __future__ import annotations

import os

import pytest

from seatide.testing.cluster import Cluster
from tests.connectors.paimon_helpers import rows_of, snapshots

pytestmark = pytest.mark.cluster


def test_drivers_killed_before_and_after_a_paimon_commit_resume_and_commit_each_batch_once(tmp_path):
    wh = tmp_path / "wh"
    markers = {point: str(tmp_path / f"killed-{point}") for point in ("paimon.staged", "paimon.before_commit", "paimon.after_commit")}
    cluster = Cluster(f"sqlite:///{tmp_path}/state.db", str(tmp_path / "data"))
    try:
        cluster.coordinator("c1")
        points = ",".join(f"{point}=once:kill:{marker}" for point, marker in markers.items())
        cluster.worker("w1", env={"SEATIDE_FAILPOINTS": points})
        cluster.submit(f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 250, job.retry.times = 3,
      job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 500, split.num = 4, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ Paimon {{ warehouse = "{wh}", database = db, table = t }} }}
""", "paimon-kill")
        job = cluster.wait_status("paimon-kill", {"FINISHED", "FAILED"}, timeout=600)
        assert job.status == "FINISHED", job.error_msg
        for point, marker in markers.items():
            assert os.path.exists(marker), f"a driver was killed at {point}"
        assert len(cluster.attempts("paimon-kill")) >= 3
    finally:
        cluster.stop_all()
    assert [r[0] for r in rows_of(wh, columns=("id",))] == list(range(500))
    commits = [(user, identifier) for user, identifier, _ in snapshots(wh)]
    assert len(commits) == 2 and len(set(commits)) == 2, commits
