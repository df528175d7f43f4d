"""Checkpoints as a product: resume after a forced stop, savepoints, refusals, staleness policies.

Real coordinator, worker and driver processes on SQLite and PostgreSQL, killed with SIGKILL.
The SQLite stories, which kill or hold only their own job's drivers (failpoints armed for that
job, ``Cluster.arm``), share the module's cluster (``shared_cluster``); a story that kills a
worker or runs on PostgreSQL starts its own.
"""

from __future__ import annotations

import os
import shutil

import pytest

from seatide.testing.driver_processes import DriverWatch, driver_pids
from seatide.testing.cluster import Cluster, assert_never_resurrected, batch_gate, http, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, streaming_job, written_ids
from tests.stores import postgresql_only

pytestmark = pytest.mark.cluster

# Refusals and staleness decisions are store-agnostic code paths already covered on both
# stores by the tests above and in test_failure_stories; these run on SQLite to keep CI short.


def _checkpoint(cluster: Cluster, job_id: str) -> dict:
    return cluster.job_info(job_id)["checkpoint"]


def _last_id(cluster: Cluster, job_id: str) -> int:
    return _checkpoint(cluster, job_id)["lastCheckpointId"] or 0


def _resume(cluster: Cluster, job_id: str, **body):
    return http("POST", cluster.any_coordinator().url + f"/api/v1/jobs/{job_id}/resume", body)


def _written(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["metrics"]["SinkWriteCount"]


def _run_then_savepoint(cluster: Cluster, out: str, job_id: str) -> None:
    """A stream that has checkpointed twice, stopped with a savepoint."""
    cluster.submit(streaming_job(out), job_id)
    wait_for(lambda: _last_id(cluster, job_id) >= 2, 180, message="two checkpoints")
    status, body = http("POST", cluster.any_coordinator().url + "/api/v1/stop-job",
                        {"jobId": job_id, "isStopWithSavePoint": True})
    assert status == 200, body
    cluster.wait_status(job_id, "SAVEPOINT_DONE", timeout=120)


def _stop_and_check_prefix(cluster: Cluster, job_id: str, out: str) -> int:
    cluster.cancel(job_id)
    cluster.wait_status(job_id, "CANCELED", timeout=90)
    ids = written_ids(out)
    assert ids, "nothing written"
    assert_exactly(ids, range(max(ids) + 1))
    return max(ids) + 1


@postgresql_only   # the stores' liveness locks on restart: tests/cluster/test_liveness.py
def test_streaming_job_comes_back_by_itself_after_every_process_is_killed(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    cluster.worker("w1")
    cluster.submit(streaming_job(out), "killall")
    # one checkpoint: the kill may land after the store took it and before Spark's commit log
    # did, and the new attempt restores from it all the same (test_jobs.py, driver.after_checkpoint)
    wait_for(lambda: _last_id(cluster, "killall") >= 1, 180, message="a checkpoint")
    for proc in cluster.procs:
        proc.kill()
    wait_for(lambda: driver_pids("killall") == [], 10, message="the driver to die with its worker")
    before = _last_id(cluster, "killall")
    with DriverWatch("killall") as watch:
        cluster.coordinator("c2")
        cluster.worker("w2")
        wait_for(lambda: any(a.worker_id == "w2" and a.state == "RUNNING" for a in cluster.attempts("killall")),
                 120, message="a new attempt running on w2")
        wait_for(lambda: _last_id(cluster, "killall") > before + 1, 120, message="checkpoints continuing")
        assert cluster.job("killall").status == "RUNNING"
        assert _checkpoint(cluster, "killall")["restored"] >= 1
        _stop_and_check_prefix(cluster, "killall", out)
    assert watch.max_seen <= 1
    assert_never_resurrected(cluster, "killall")


def test_cancel_then_resume_finishes_with_no_duplicate_and_no_gap(shared_cluster: Cluster, tmp_path):
    cluster = shared_cluster
    out = str(tmp_path / "out")
    gate = str(tmp_path / "gate")
    # two batches before the cancel (the restore is from a checkpoint past the first), two after
    # the resume (a batch is 1-3 s: six and four were 2026-11-28's)
    cluster.arm("cancel-resume", batch_gate(gate, passes=2))
    cluster.submit(batch_job(out, rows=400, rows_per_batch=100), "cancel-resume")
    wait_for(lambda: _written(cluster, "cancel-resume") >= 200, 180, message="two batches committed")
    cluster.cancel("cancel-resume")     # the third batch is held at its start until the cancel
    cluster.wait_status("cancel-resume", "CANCELED", timeout=90)
    assert_exactly(written_ids(out + "/p0"), range(200))   # it stopped at the next batch boundary
    open_gate(gate)
    status, body = _resume(cluster, "cancel-resume")
    assert status == 200, body
    job = cluster.wait_status("cancel-resume", {"FINISHED", "FAILED"}, timeout=240)
    assert job.status == "FINISHED", job.error_msg
    assert job.incarnation == 2 and job.restored_from == "cancel-resume@1"
    assert_exactly(written_ids(out + "/p0"), range(400))
    kinds = [e.kind for e in cluster.events("cancel-resume")]
    assert "JOB_RESUMED" in kinds and "CHECKPOINT_RESTORED" in kinds


# On SQLite's shared cluster: the refusal reads the checkpoint directory, not the store; the
# resume's store writes run on PostgreSQL in the savepoint story below.
def test_resume_without_its_checkpoint_is_refused_and_fresh_fallback_starts_over(shared_cluster: Cluster, tmp_path):
    cluster = shared_cluster
    out = str(tmp_path / "out")
    gate = str(tmp_path / "gate")
    cluster.arm("lost-ckpt", batch_gate(gate, passes=1))
    cluster.submit(batch_job(out, rows=300, rows_per_batch=100), "lost-ckpt")
    wait_for(lambda: _written(cluster, "lost-ckpt") >= 100, 180, message="a batch committed")
    cluster.cancel("lost-ckpt")
    cluster.wait_status("lost-ckpt", "CANCELED", timeout=90)
    open_gate(gate)
    shutil.rmtree(cluster.checkpoint_dir("lost-ckpt"))
    status, body = _resume(cluster, "lost-ckpt")
    assert status == 409, body
    message = body["error"]
    assert "pipeline 1" in message and "missing" in message and "--fallback fresh" in message
    assert cluster.job("lost-ckpt").status == "CANCELED" and cluster.job("lost-ckpt").incarnation == 1
    status, body = _resume(cluster, "lost-ckpt", fallback="fresh")
    assert status == 200, body
    job = cluster.wait_status("lost-ckpt", {"FINISHED", "FAILED"}, timeout=240)
    assert job.status == "FINISHED", job.error_msg
    assert "RESTORE_FALLBACK_FRESH" in [e.kind for e in cluster.events("lost-ckpt")]
    assert set(written_ids(out + "/p0")) == set(range(300))


def test_resume_with_an_added_source_is_refused(shared_cluster: Cluster, tmp_path):
    cluster = shared_cluster
    out = str(tmp_path / "out")
    original = streaming_job(out)
    cluster.submit(original, "changed")
    wait_for(lambda: _last_id(cluster, "changed") >= 1, 180, message="a checkpoint")
    cluster.cancel("changed")
    cluster.wait_status("changed", "CANCELED", timeout=90)
    # the same pipeline now reads a second source (the sink unions both)
    changed = original.replace('sequence.field = "id"', 'sequence.field = "id"\n    plugin_output = "a"', 1)
    changed = changed.replace("\n}\nsink {", """
  FakeSource {
    plugin_output = "b"
    row.num = 10
    schema = { fields { id = bigint, name = string } }
  }
}
sink {""", 1)
    changed = changed.replace("LocalFile {", 'LocalFile {\n    plugin_input = ["a", "b"]\n   ', 1)
    status, body = _resume(cluster, "changed", config=changed)
    assert status in (400, 409), body
    text = body.get("error") or body.get("detail")
    assert "pipeline 1" in text and "sources changed" in text and "--fallback fresh" in text, text
    assert cluster.job("changed").incarnation == 1


@postgresql_only   # on SQLite: tests/cluster/test_seatunnel_api.py
def test_savepoint_then_resume_continues_exactly_where_it_stopped(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    cluster.worker("w1")
    _run_then_savepoint(cluster, out, "sp")
    report = http("GET", cluster.any_coordinator().url + "/api/v1/jobs/sp/checkpoints")[1]
    savepoints = [c for c in report["history"] if c["kind"] == "SAVEPOINT"]
    assert len(savepoints) == 1
    stopped = written_ids(out)
    assert_exactly(stopped, range(len(stopped)))
    status, body = _resume(cluster, "sp", fromSavepoint=savepoints[0]["checkpointId"])
    assert status == 200, body
    cluster.wait_status("sp", "RUNNING", timeout=120)
    wait_for(lambda: len(written_ids(out)) > len(stopped) + 20, 120, message="rows after the savepoint")
    total = _stop_and_check_prefix(cluster, "sp", out)
    assert total > len(stopped)
    assert cluster.job("sp").restored_from == f"savepoint {savepoints[0]['checkpointId']}"


# Each policy's decision is unit-tested (tests/coordinator/test_reconcile.py); here the two with
# an effect on processes run end to end in CI, and warn (a flag only) in the soak set.
# CI runs the default policy (restart); warn and fail are in the soak set (CI time).
@pytest.mark.parametrize("policy", [pytest.param("warn", marks=pytest.mark.soak), "restart",
                                    pytest.param("fail", marks=pytest.mark.soak)])
def test_blocked_sink_is_flagged_stale_and_its_policy_applies(shared_cluster: Cluster, tmp_path, policy):
    # warn leaves its job RUNNING, its driver hung: shared_cluster ends it after the test
    cluster, out, marker, job_id = shared_cluster, str(tmp_path / "out"), str(tmp_path / "hung-once"), f"stale-{policy}"
    cluster.arm(job_id, f"driver.before_sink_write=once:hang:{marker}")
    # The window opens once the attempt's sources are up (Spark's start is not in it) and must
    # hold the restarted attempt's first micro-batch: 10 s measured at load 14 on two cores
    # (2026-11-29; 25 s before). Were one slower, that attempt would be restarted in turn.
    window_ms = 15000
    job = streaming_job(out).replace("job.retry.times = 3", f"job.retry.times = 3\n  checkpoint.stale-after = {window_ms}\n"
                                     f"  checkpoint.on-stale = {policy}")
    cluster.submit(job, job_id)
    cluster.wait_status(job_id, "RUNNING", timeout=120)
    wait_for(lambda: os.path.exists(marker), 120, message="the sink to block")
    wait_for(lambda: "CHECKPOINT_STALE" in [e.kind for e in cluster.events(job_id)], window_ms / 1000 + 10,
             message="the stale flag")
    if policy == "warn":
        assert cluster.job(job_id).status == "RUNNING"
        assert _checkpoint(cluster, job_id)["health"] == "CHECKPOINT_STALE"
        assert len(cluster.attempts(job_id)) == 1
    elif policy == "restart":
        wait_for(lambda: len(cluster.attempts(job_id)) >= 2, 30, message="a new attempt")
        wait_for(lambda: _last_id(cluster, job_id) >= 1, 120, message="checkpoints from the new attempt")
        assert cluster.job(job_id).status == "RUNNING"
        assert cluster.attempts(job_id)[0].state == "LOST"
        assert "checkpoint stale" in cluster.attempts(job_id)[0].error
        wait_for(lambda: _checkpoint(cluster, job_id)["health"] in ("HEALTHY", "IDLE"), 30)
    else:
        job_row = cluster.wait_status(job_id, "FAILED", timeout=30)
        assert "checkpoint stale" in job_row.error_msg
        wait_for(lambda: driver_pids(job_id) == [], 30, message="the blocked driver to be killed")


@pytest.fixture
def store_cluster(store_url, request) -> Cluster:
    """SQLite: the module's shared cluster; PostgreSQL: a coordinator and a worker of its own."""
    if store_url.startswith("sqlite"):
        return request.getfixturevalue("shared_cluster")
    cluster = request.getfixturevalue("cluster")
    cluster.coordinator("c1")
    cluster.worker("w1")
    return cluster


def test_a_savepoint_is_copied_outside_any_store_transaction(store_cluster: Cluster, tmp_path):
    """While the driver copies a savepoint (held there by a gate), the store stays writable,
    the job's row included: the id is reserved as PENDING first, COMPLETED after the copy.
    Both stores (their locks are the subject); on SQLite in the module's shared cluster."""
    import threading

    from sqlalchemy import select, update

    from seatide.store import schema as s

    cluster, gate = store_cluster, str(tmp_path / "copy-gate")
    cluster.arm("sp-copy", f"driver.savepoint_copy=gate:0:{gate}")
    cluster.submit(streaming_job(str(tmp_path / "out")), "sp-copy")
    wait_for(lambda: _last_id(cluster, "sp-copy") >= 1, 180, message="a checkpoint")
    status, body = http("POST", cluster.any_coordinator().url + "/api/v1/stop-job",
                        {"jobId": "sp-copy", "isStopWithSavePoint": True})
    assert status == 200, body

    def pending():
        with cluster.store.read() as conn:
            return conn.execute(select(s.checkpoints).where(
                s.checkpoints.c.job_id == "sp-copy", s.checkpoints.c.kind == "SAVEPOINT")).first()

    row = wait_for(pending, 120, message="the savepoint reserved while its copy is held")
    assert row.status == "PENDING"
    wrote = threading.Event()

    def touch_job_row():
        with cluster.store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == "sp-copy").values(updated_at=s.jobs.c.updated_at))
        wrote.set()

    threading.Thread(target=touch_job_row, daemon=True).start()
    assert wrote.wait(10), "the job's row stayed locked while the savepoint was being copied"
    open(gate, "w").close()
    cluster.wait_status("sp-copy", "SAVEPOINT_DONE", timeout=120)
    assert pending().status == "COMPLETED"


def test_resume_moves_no_directory_itself_and_a_driver_killed_mid_way_finishes_the_move(shared_cluster: Cluster,
                                                                                      tmp_path):
    """Resume is a compare-and-set and nothing else; the new incarnation's driver puts the
    savepoint in place, and a driver killed half-way leaves it for the next attempt to finish.
    While the resume is checked, the new incarnation's driver is held by a gate just after its
    first heartbeat, before it touches any checkpoint directory (a worker of its own, killed
    there, cost a cluster's start)."""
    cluster = shared_cluster
    out, killed_once, held = str(tmp_path / "out"), str(tmp_path / "killed-once"), str(tmp_path / "held")
    _run_then_savepoint(cluster, out, "prep")
    stopped = written_ids(out)
    # armed now, read when the next driver is launched: the savepoint's run met neither point
    cluster.arm("prep", f"driver.after_first_heartbeat=gate:0:{held},driver.checkpoint_staged=once:kill:{killed_once}")
    root = os.path.dirname(cluster.checkpoint_dir("prep"))      # the run's directory

    def tree() -> list:
        return sorted((path, os.path.getmtime(path)) for path, _, _ in os.walk(root))

    before = tree()
    savepoint = next(c for c in http("GET", cluster.any_coordinator().url + "/api/v1/jobs/prep/checkpoints")[1]
                     ["history"] if c["kind"] == "SAVEPOINT")
    status, body = _resume(cluster, "prep", fromSavepoint=savepoint["checkpointId"])
    assert status == 200, body
    assert tree() == before, "the resume itself moved or copied checkpoint directories"
    open_gate(held)
    wait_for(lambda: len(written_ids(out)) > len(stopped) + 20, 240, message="rows after the savepoint")
    assert os.path.exists(killed_once), "the first driver was not killed mid-way"
    assert len(cluster.attempts("prep")) >= 2
    prepared = [e for e in cluster.events("prep") if e.kind == "CHECKPOINT_PREPARED"]
    assert len(prepared) == 1, [e.detail for e in prepared]
    assert len([n for n in os.listdir(root) if n.startswith("1.replaced-")]) == 1
    assert not [n for n in os.listdir(root) if ".restoring-" in n]
    _stop_and_check_prefix(cluster, "prep", out)


# the decision's store writes run on both stores in tests/runtime/test_sink_decision.py
def test_driver_killed_after_its_sink_decision_has_the_batch_published_by_the_next_attempt(shared_cluster: Cluster,
                                                                                           tmp_path):
    """SIGKILL between the decision (the store write) and the publish: the replacement rolls the
    decided batch forward instead of redoing it, and every row is written once."""
    from sqlalchemy import select

    from seatide.store import schema as s

    cluster = shared_cluster
    out, killed_once = str(tmp_path / "out"), str(tmp_path / "killed")
    cluster.arm("decided", f"sink.after_decision=once:kill:{killed_once}")
    # two batches: the first, decided by the killed driver and rolled forward, and one more
    cluster.submit(batch_job(out, rows=200, rows_per_batch=100, retries=5), "decided")
    job = cluster.wait_status("decided", {"FINISHED", "FAILED"}, timeout=600)
    assert job.status == "FINISHED", job.error_msg
    assert os.path.exists(killed_once), "no driver was killed after its decision"
    assert_exactly(written_ids(out + "/p0"), range(200))
    attempts = cluster.attempts("decided")
    assert len(attempts) >= 2
    with cluster.store.read() as conn:
        decided = conn.execute(select(s.sink_manifests).where(s.sink_manifests.c.job_id == "decided")
                               .order_by(s.sink_manifests.c.batch_id)).all()
    # The killed attempt's decision of the first batch stands and was published by a later one.
    assert decided[0].attempt_id == attempts[0].attempt_id and decided[0].status == "PUBLISHED"
    assert all(m.status == "PUBLISHED" for m in decided)
    assert len({m.batch_id for m in decided}) == len(decided)
