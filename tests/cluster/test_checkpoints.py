"""Checkpoints as a product: resume after a forced stop, savepoints, refusals, staleness policies.

Real coordinator, worker and driver processes on SQLite and PostgreSQL, killed with SIGKILL.
The SQLite stories, which kill or hold only their own job's drivers (failpoints armed for that
job, ``Cluster.arm``), share the module's cluster (``shared_cluster``); a story that kills a
worker or runs on PostgreSQL starts its own.

CI time (issue 31): stories that run the same setup are one job each, every assertion kept
(each docstring names the stories it holds): a driver start is ~5 CPU-s on two cores, and a
kill/resume cycle runs only where the story needs one.
"""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from seatide.testing.driver_processes import DriverWatch, driver_pids
from seatide.testing.cluster import Cluster, assert_never_resurrected, batch_gate, http, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, streaming_job, written_ids
from tests.stores import postgresql_only

pytestmark = pytest.mark.cluster

# Refusals and staleness decisions are store-agnostic code paths, covered on both stores in
# tests/coordinator and test_failure_stories; they run on SQLite's shared cluster here.


def _checkpoint(cluster: Cluster, job_id: str) -> dict:
    return cluster.job_info(job_id)["checkpoint"]


def _last_id(cluster: Cluster, job_id: str) -> int:
    return _checkpoint(cluster, job_id)["lastCheckpointId"] or 0


def _resume(cluster: Cluster, job_id: str, **body):
    # A resume plans the job's config: a coordinator's first (one started after the kill-all)
    # imports that machinery, as a first submit does (Cluster.submit: 8-10 s on a loaded host).
    return http("POST", cluster.any_coordinator().url + f"/api/v1/jobs/{job_id}/resume", body, timeout=60)


def _written(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["metrics"]["SinkWriteCount"]


def _stop_with_savepoint_copy_held(cluster: Cluster, job_id: str, gate: str) -> int:
    """Stop ``job_id`` with a savepoint while its driver's copy is held at ``gate`` (armed for the
    job before its driver started: ``driver.savepoint_copy=gate:0:PATH``). Meanwhile the store
    stays writable, the job's row included: the id is reserved as PENDING first, in a transaction
    of its own, and COMPLETED after the copy. Returns the savepoint's id.

    Run on both stores (a story on each): the transactions are the reporter's, the same code on
    both, but what a copy inside one would hold is each store's own lock: SQLite's single writer
    lock (every write is BEGIN IMMEDIATE: the whole database), PostgreSQL's lock on the job's row
    (``attempt_tx`` takes it FOR UPDATE). Either would stall this write."""
    from sqlalchemy import select, update

    from seatide.store import schema as s

    status, body = http("POST", cluster.any_coordinator().url + "/api/v1/stop-job",
                        {"jobId": job_id, "isStopWithSavePoint": True})
    assert status == 200, body

    def savepoint():
        with cluster.store.read() as conn:
            return conn.execute(select(s.checkpoints).where(
                s.checkpoints.c.job_id == job_id, s.checkpoints.c.kind == "SAVEPOINT")).first()

    row = wait_for(savepoint, 120, message="the savepoint reserved while its copy is held")
    assert row.status == "PENDING"
    wrote = threading.Event()

    def touch_job_row():
        with cluster.store.write() as conn:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(updated_at=s.jobs.c.updated_at))
        wrote.set()

    threading.Thread(target=touch_job_row, daemon=True).start()
    assert wrote.wait(10), "the job's row stayed locked while the savepoint was being copied"
    open_gate(gate)
    cluster.wait_status(job_id, "SAVEPOINT_DONE", timeout=120)
    assert savepoint().status == "COMPLETED"
    return row.checkpoint_id


def _the_savepoint(cluster: Cluster, job_id: str) -> dict:
    """The job's one savepoint, as the REST API's checkpoint history lists it."""
    report = http("GET", cluster.any_coordinator().url + f"/api/v1/jobs/{job_id}/checkpoints")[1]
    savepoints = [c for c in report["history"] if c["kind"] == "SAVEPOINT"]
    assert len(savepoints) == 1, savepoints
    return savepoints[0]


def _stop_and_check_prefix(cluster: Cluster, job_id: str, out: str) -> int:
    cluster.cancel(job_id)
    cluster.wait_status(job_id, "CANCELED", timeout=90)
    ids = written_ids(out)
    assert ids, "nothing written"
    assert_exactly(ids, range(max(ids) + 1))
    return max(ids) + 1


# PostgreSQL: the stores' liveness locks on restart (tests/cluster/test_liveness.py), the job
# row's lock during the savepoint's copy, and a resume's store writes (on SQLite: the resume
# stories below, and tests/cluster/test_seatunnel_api.py's savepoint in the soak set).
@postgresql_only
def test_a_stream_comes_back_after_every_process_is_killed_and_resumes_from_a_savepoint_where_it_stopped(
        cluster: Cluster, tmp_path):
    """Three stories of one streaming job (one job, not three: CI time; every assertion kept).
    (1) Every process SIGKILLed: a new coordinator and worker bring the job back by themselves,
    restored from its checkpoint, and it goes on checkpointing. (2) Its savepoint is copied
    outside any store transaction (``_stop_with_savepoint_copy_held``). (3) Resumed from that
    savepoint, it continues exactly where it stopped. Never two drivers at once, from the
    restart to the end; no incarnation's status moves after it ended."""
    out, gate = str(tmp_path / "out"), str(tmp_path / "copy-gate")
    cluster.coordinator("c1")
    cluster.worker("w1")
    cluster.arm("killall", f"driver.savepoint_copy=gate:0:{gate}")     # only the savepoint's driver meets it
    cluster.submit(streaming_job(out), "killall")
    # one checkpoint: the kill may land after the store took it and before Spark's commit log
    # did, and the new attempt restores from it all the same (test_jobs.py, driver.after_checkpoint)
    wait_for(lambda: _last_id(cluster, "killall") >= 1, 180, message="a checkpoint")
    for proc in cluster.procs:
        proc.kill()
    wait_for(lambda: driver_pids("killall") == [], 10, message="the driver to die with its worker")
    before = _last_id(cluster, "killall")
    with DriverWatch("killall") as watch:
        # side by side (the store's schema is in place): two Python starts' wait, not their sum
        coordinator, worker = cluster.coordinator("c2", wait=False), cluster.worker("w2", wait=False)
        cluster.wait_serving(coordinator)
        cluster.wait_registered(worker)
        wait_for(lambda: any(a.worker_id == "w2" and a.state == "RUNNING" for a in cluster.attempts("killall")),
                 300, message="a new attempt running on w2")
        # a cold driver's start and two checkpoints: 120 s ran out under a CPU hog at load 18 (a safety net, not a bound)
        wait_for(lambda: _last_id(cluster, "killall") > before + 1, 400, message="checkpoints continuing")
        assert cluster.job("killall").status == "RUNNING"
        assert _checkpoint(cluster, "killall")["restored"] >= 1
        savepoint_id = _stop_with_savepoint_copy_held(cluster, "killall", gate)
        assert _the_savepoint(cluster, "killall")["checkpointId"] == savepoint_id
        stopped = written_ids(out)
        assert_exactly(stopped, range(len(stopped)))
        status, body = _resume(cluster, "killall", fromSavepoint=savepoint_id)
        assert status == 200, body
        cluster.wait_status("killall", "RUNNING", timeout=120)
        wait_for(lambda: len(written_ids(out)) > len(stopped) + 20, 400, message="rows after the savepoint")
        total = _stop_and_check_prefix(cluster, "killall", out)
    assert total > len(stopped)
    assert cluster.job("killall").restored_from == f"savepoint {savepoint_id}"
    assert watch.max_seen <= 1
    assert_never_resurrected(cluster, "killall")


def test_a_decided_batch_is_published_by_the_next_attempt_and_cancel_then_resume_leaves_no_duplicate_and_no_gap(
        shared_cluster: Cluster, tmp_path):
    """Two stories of one batch job (one job, not two: CI time; every assertion kept).
    (1) SIGKILL between a batch's decision (the store write) and its publish: the replacement
    rolls the decided batch forward instead of redoing it. (2) A cancel stops the job at the
    next batch boundary; a resume from its checkpoint finishes it. Every row is written once.
    The decision's store writes run on both stores in tests/runtime/test_sink_decision.py."""
    from sqlalchemy import select

    from seatide.failpoints import POINTS_ENV
    from seatide.store import schema as s

    cluster = shared_cluster
    out, gate, killed_once = str(tmp_path / "out"), str(tmp_path / "gate"), str(tmp_path / "killed")
    # Batches of 100: the first decided by the killed driver and rolled forward by its
    # replacement, which commits two before the cancel (the restore is from a checkpoint past the
    # first; the gate counts per driver, and the replacement replays the first), the last after
    # the resume (a batch is 1-3 s quiet, up to 8 s at load 10: six and four were 2026-11-28's,
    # then two after the resume).
    cluster.arm("cancel-resume",
                f"{batch_gate(gate, passes=2)[POINTS_ENV]},sink.after_decision=once:kill:{killed_once}")
    cluster.submit(batch_job(out, rows=300, rows_per_batch=100, retries=5), "cancel-resume")
    # two drivers' starts (the killed one's and its replacement's) before the second commit
    wait_for(lambda: _written(cluster, "cancel-resume") >= 200, 300, message="two batches committed")
    assert os.path.exists(killed_once), "no driver was killed after its decision"
    cluster.cancel("cancel-resume")     # the third batch is held at its start until the cancel
    cluster.wait_status("cancel-resume", "CANCELED", timeout=90)
    assert_exactly(written_ids(out + "/p0"), range(200))   # it stopped at the next batch boundary
    open_gate(gate)
    status, body = _resume(cluster, "cancel-resume")
    assert status == 200, body
    job = cluster.wait_status("cancel-resume", {"FINISHED", "FAILED"}, timeout=240)
    assert job.status == "FINISHED", job.error_msg
    assert job.incarnation == 2 and job.restored_from == "cancel-resume@1"
    assert_exactly(written_ids(out + "/p0"), range(300))
    kinds = [e.kind for e in cluster.events("cancel-resume") if e.incarnation == 2]
    assert "JOB_RESUMED" in kinds and "CHECKPOINT_RESTORED" in kinds
    attempts = cluster.attempts("cancel-resume")
    assert len([a for a in attempts if a.incarnation == 1]) >= 2
    with cluster.store.read() as conn:
        decided = conn.execute(select(s.sink_manifests).where(s.sink_manifests.c.job_id == "cancel-resume")
                               .order_by(s.sink_manifests.c.incarnation, s.sink_manifests.c.batch_id)).all()
    # The killed attempt's decision of the first batch stands and was published by a later one.
    assert decided[0].attempt_id == attempts[0].attempt_id and decided[0].status == "PUBLISHED"
    assert all(m.status == "PUBLISHED" for m in decided)
    assert len({m.batch_id for m in decided}) == len(decided)


def test_attempts_after_drivers_killed_once_a_pipelines_data_ended_end_it_without_a_query_and_the_job_without_spark(
        shared_cluster: Cluster, tmp_path):
    """Two stories of one two-pipeline BATCH job (CI time: one job). A driver is SIGKILLed at
    ``driver.before_pipeline_end`` of a pipeline: its batches are committed and its sources' ends
    recorded, its end is not. (1) Pipeline 1 is killed so while pipeline 2 is held at its first
    batch: the next attempt ends pipeline 1 from the store's records, without a query, and runs
    pipeline 2 on Spark. (2) That attempt is killed so at pipeline 2's end: the next one ends it
    and the job from the records alone, and never forks a JVM (a cold start is ~9 CPU-s for no work)."""
    from seatide.runtime.session import JVM_STARTING
    from seatide.store.paths import driver_log_path

    cluster = shared_cluster
    out, gate = str(tmp_path / "out"), str(tmp_path / "gate")
    killed = [str(tmp_path / f"killed-{p}") for p in (1, 2)]
    cluster.arm("ended-data", ",".join([f"driver.batch_start@2=gate:0:{gate}"]
                                       + [f"driver.before_pipeline_end@{p}=once:kill:{m}" for p, m in zip((1, 2), killed)]))
    # one batch each: the story is each pipeline's end, which follows its last batch however many ran
    cluster.submit(batch_job(out, rows=100, pipelines=2, rows_per_batch=100), "ended-data")
    wait_for(lambda: os.path.exists(killed[0]), 300, message="pipeline 1's driver killed before its end")
    open_gate(gate)
    job = cluster.wait_status("ended-data", {"FINISHED", "FAILED"}, timeout=300)
    assert job.status == "FINISHED", job.error_msg
    assert os.path.exists(killed[1]), "no driver was killed before pipeline 2's end"
    assert_exactly(written_ids(out + "/p0"), range(100))
    assert_exactly(written_ids(out + "/p1"), range(100, 200))
    attempts = cluster.ended_attempts("ended-data")

    def log_of(attempt) -> str:
        with open(driver_log_path(cluster.data_dir, "ended-data", attempt.attempt_id), errors="replace") as f:
            return f.read()
    logs = [log_of(a) for a in attempts]
    assert JVM_STARTING in logs[0]      # the log says so when a driver starts Spark
    ended_1 = "pipeline 1: its sources' ends were recorded after its last commit; FINISHED without a query"
    assert any(ended_1 in text and JVM_STARTING in text for text in logs[1:-1]), "pipeline 1 ran again"
    assert JVM_STARTING not in logs[-1], "the attempt after the data's end started Spark"
    assert "ended without Spark" in logs[-1]
    assert attempts[-1].state == "SUCCEEDED"


def test_resume_moves_no_directory_itself_and_a_driver_killed_mid_way_finishes_the_move(shared_cluster: Cluster,
                                                                                      tmp_path):
    """Resume is a compare-and-set and nothing else; the new incarnation's driver puts the
    savepoint in place, and a driver killed half-way leaves it for the next attempt to finish.
    While the resume is checked, the new incarnation's driver is held by a gate just after its
    first heartbeat, before it touches any checkpoint directory (a worker of its own, killed
    there, cost a cluster's start). The savepoint it resumes from is taken with its copy held:
    SQLite's run of the copy outside any store transaction (``_stop_with_savepoint_copy_held``),
    in this job rather than one of its own (CI time).

    Then two refusals of the same job, cancelled with a checkpoint (here, not in a job of their
    own: a driver's start, CI time): a resume whose pipeline now reads an added source, and one
    whose checkpoint directory is gone, are each refused saying which pipeline, why and how to
    go on, and change nothing; a resume with fallback fresh then starts the pipeline over.
    The refusals read the job's plan and its checkpoint directory, not the store's locks; a
    resume's store writes run on PostgreSQL in the kill-everything story."""
    cluster = shared_cluster
    out, copy_gate = str(tmp_path / "out"), str(tmp_path / "copy-gate")
    killed_once, held = str(tmp_path / "killed-once"), str(tmp_path / "held")
    cluster.arm("prep", f"driver.savepoint_copy=gate:0:{copy_gate}")
    original = streaming_job(out)
    cluster.submit(original, "prep")
    # one checkpoint: the savepoint needs a running query, not a history (a batch is up to 8 s at load 10)
    wait_for(lambda: _last_id(cluster, "prep") >= 1, 180, message="a checkpoint")
    _stop_with_savepoint_copy_held(cluster, "prep", copy_gate)
    stopped = written_ids(out)
    # armed now, read when the next driver is launched: the savepoint's run met neither point
    cluster.arm("prep", f"driver.after_first_heartbeat=gate:0:{held},driver.checkpoint_staged=once:kill:{killed_once}")
    root = os.path.dirname(cluster.checkpoint_dir("prep"))      # the run's directory

    def tree() -> list:
        return sorted((path, os.path.getmtime(path)) for path, _, _ in os.walk(root))

    before = tree()
    savepoint = _the_savepoint(cluster, "prep")
    status, body = _resume(cluster, "prep", fromSavepoint=savepoint["checkpointId"])
    assert status == 200, body
    assert tree() == before, "the resume itself moved or copied checkpoint directories"
    open_gate(held)
    wait_for(lambda: len(written_ids(out)) > len(stopped) + 20, 240, message="rows after the savepoint")
    assert os.path.exists(killed_once), "the first driver was not killed mid-way"
    # the resumed incarnation's: its killed driver's attempt and the one that finished the move
    assert len([a for a in cluster.attempts("prep") if a.incarnation == 2]) >= 2
    prepared = [e for e in cluster.events("prep") if e.kind == "CHECKPOINT_PREPARED"]
    assert len(prepared) == 1, [e.detail for e in prepared]
    assert len([n for n in os.listdir(root) if n.startswith("1.replaced-")]) == 1
    assert not [n for n in os.listdir(root) if ".restoring-" in n]
    _stop_and_check_prefix(cluster, "prep", out)
    _refused_then_fresh(cluster, "prep", original, out)


def _refused_then_fresh(cluster: Cluster, job_id: str, original: str, out: str) -> None:
    """The refusals of a resume of ``job_id`` (CANCELED, with a checkpoint), then a fresh start."""
    incarnation = cluster.job(job_id).incarnation
    # the same pipeline now reads a second source (the sink unions both)
    changed = original.replace("  FakeSource {", '  FakeSource {\n    plugin_output = "a"', 1).replace(
        "\n}\nsink {", """
  FakeSource {
    plugin_output = "b"
    row.num = 10
    schema = { fields { id = bigint, name = string } }
  }
}
sink {""", 1).replace("LocalFile { path", 'LocalFile { plugin_input = ["a", "b"], path', 1)
    assert changed.count("FakeSource") == 2 and '["a", "b"]' in changed, changed
    status, body = _resume(cluster, job_id, config=changed)
    assert status in (400, 409), body
    text = body.get("error") or body.get("detail")
    assert "pipeline 1" in text and "sources changed" in text and "--fallback fresh" in text, text
    assert cluster.job(job_id).incarnation == incarnation
    shutil.rmtree(cluster.checkpoint_dir(job_id))
    status, body = _resume(cluster, job_id)
    assert status == 409, body
    message = body["error"]
    assert "pipeline 1" in message and "missing" in message and "--fallback fresh" in message
    assert cluster.job(job_id).status == "CANCELED" and cluster.job(job_id).incarnation == incarnation
    status, body = _resume(cluster, job_id, fallback="fresh")
    assert status == 200, body
    # started over: the first id written a second time (a new incarnation's files beside the old)
    wait_for(lambda: written_ids(out)[0] >= 2, 240, message="the fresh start's first rows")
    assert "RESTORE_FALLBACK_FRESH" in [e.kind for e in cluster.events(job_id)]
    assert cluster.job(job_id).incarnation == incarnation + 1


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
        wait_for(lambda: _last_id(cluster, job_id) >= 1, 240,      # a cold driver: 100-130 s at load 13-19
                 message="checkpoints from the new attempt")
        assert cluster.job(job_id).status == "RUNNING"
        assert cluster.attempts(job_id)[0].state == "LOST"
        assert "checkpoint stale" in cluster.attempts(job_id)[0].error
        wait_for(lambda: _checkpoint(cluster, job_id)["health"] in ("HEALTHY", "IDLE"), 30)
    else:
        job_row = cluster.wait_status(job_id, "FAILED", timeout=30)
        assert "checkpoint stale" in job_row.error_msg
        wait_for(lambda: driver_pids(job_id) == [], 30, message="the blocked driver to be killed")

