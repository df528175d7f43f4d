"""The failure stories the control plane must survive, with real processes and SIGKILL.

Stories 1 and 2 (leaders that die around a terminal status and its cleanup; one run) run on
PostgreSQL in CI and on SQLite in the soak set; the others on one store each (see
tests/stores.py). After each, the invariants
are checked: never two drivers for one job at any sampled moment, no terminal job ever
moved again, and exactly-once output where the job writes any.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timezone

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.driver_processes import DriverWatch, driver_pids, exited
from seatide.testing.cluster import Cluster, assert_never_resurrected, batch_gate, http, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, streaming_job, written_ids
from tests.stores import postgresql_in_ci, postgresql_only, sqlite_only

pytestmark = pytest.mark.cluster


def _result(cluster: Cluster, job_id: str):
    with cluster.store.read() as conn:
        return conn.execute(select(s.job_results).where(s.job_results.c.job_id == job_id)).first()


def _running_ids(cluster: Cluster) -> list[str]:
    return [j["jobId"] for j in http("GET", cluster.any_coordinator().url + "/api/v1/running-jobs")[1]]


def _new_leader(cluster: Cluster, old_epoch: int, timeout: float = 15.0):
    return wait_for(lambda: (lambda l: l if l.epoch > old_epoch and l.expires_at > time.time() else None)(
        cluster.leader()), timeout, message=f"a leader with epoch > {old_epoch}")


# Stories 1 and 2 in one run: the leader that writes the terminal status dies right after it,
# the next leader dies inside the cleanup delay too, and the third cleans up. Each story's
# checks are kept; one job, one driver's Spark start and one cluster serve both (CI time).
# SQLite's twin in the soak set (CI time). Not seen on SQLite in CI since the crash at every
# failpoint's SQLite run went to the soak set too (f552e78): a SQLite leader is killed in CI
# only under a running job (the streaming story below), and meets coordinator.before_cleanup
# as an error (test_failpoints.py).
@postgresql_in_ci
def test_terminal_job_is_never_restarted_and_cleanup_survives_two_leader_deaths(cluster: Cluster, tmp_path):
    """Story 1: the leader dies right after writing the terminal status, before cleanup; no
    later leader starts the finished job again. Story 2: the next leader dies inside the
    cleanup delay too; the third cleans up."""
    cluster.cleanup_delay = 8.0
    # The first leader is armed to die right after it commits a terminal status.
    # Started side by side, not one after the other (c1, then c2, c3, w1: 06:29:59 -> 06:30:06.8
    # to the submit at load 3.5); c2 and c3 once c1 leads, so that c1 is the one armed.
    c1 = cluster.coordinator("c1", env={"SEATIDE_FAILPOINTS": "coordinator.after_terminal_status=kill"}, wait=False)
    w1 = cluster.worker("w1", wait=False)
    cluster.wait_serving(c1)
    wait_for(lambda: cluster.leader().node_id == "c1", 15, message="c1 leads")
    coordinators = [c1, cluster.coordinator("c2", wait=False), cluster.coordinator("c3", wait=False)]
    cluster.wait_serving(*coordinators)
    cluster.wait_registered(w1)
    out = str(tmp_path / "out")
    with DriverWatch("story1") as watch:
        cluster.submit(batch_job(out, rows=100), "story1")
        wait_for(lambda: not c1.alive, 120, message="c1 to die at the failpoint")
        assert cluster.job("story1").status == "FINISHED"
        assert _result(cluster, "story1").cleanup == "DIRTY"
        due = _result(cluster, "story1").cleanup_due_at
        second = _new_leader(cluster, 1)
        assert time.time() < due, "the delay window passed before the second leader could be killed"
        cluster.leader_proc().kill()
        _new_leader(cluster, second.epoch)
        assert _result(cluster, "story1").cleanup == "DIRTY"
        wait_for(lambda: _result(cluster, "story1").cleanup == "CLEAN", due - time.time() + 20,
                 message="the third leader's cleanup")
    survivors = [c for c in coordinators if c.alive]
    assert len(survivors) == 1 and cluster.leader().node_id == survivors[0].name
    assert cluster.job("story1").status == "FINISHED"
    assert len(cluster.attempts("story1")) == 1, "the finished job was started again"
    assert "story1" not in _running_ids(cluster)
    assert driver_pids("story1") == []
    assert not os.path.exists(cluster.checkpoint_dir("story1"))
    assert watch.max_seen <= 1
    assert_never_resurrected(cluster, "story1")
    assert_exactly(written_ids(out + "/p0"), range(100))


def _committed_rows(cluster: Cluster, job_id: str) -> tuple[int, int]:
    with cluster.store.read() as conn:
        rows = conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id)).all()
    return sum(p.rows_written for p in rows), sum(p.status == "FINISHED" for p in rows)


# In the soak set (CI time): CI kills the leader of a running bounded job, which then finishes
# once, in tests/cluster/test_failpoints.py (coordinator.before_lease_renew, both stores).
@pytest.mark.soak
@postgresql_only
def test_bounded_job_finishes_exactly_once_across_leader_kills(cluster: Cluster, tmp_path):
    """Story 3: 5 pipelines x 200 rows; the leader is killed at ~25%, and again while four
    pipelines have finished and the fifth is held mid-way (a gate on pipeline 4 alone, after
    its first batch), so the second kill surely falls between pipeline ends."""
    for name in ("c1", "c2", "c3"):
        cluster.coordinator(name)
    gate = str(tmp_path / "gate")
    cluster.worker("w1", slots=1, env=batch_gate(gate, passes=1, pipeline=4))
    out = str(tmp_path / "out")
    with DriverWatch("story3") as watch:
        cluster.submit(batch_job(out, rows=200, pipelines=5, rows_per_batch=50), "story3")
        wait_for(lambda: _committed_rows(cluster, "story3")[0] >= 250, 240, message="a quarter committed")
        epoch = cluster.leader().epoch
        cluster.leader_proc().kill()
        _new_leader(cluster, epoch)
        wait_for(lambda: _committed_rows(cluster, "story3") == (850, 4), 240,
                 message="pipelines 0-3 finished, pipeline 4 held after its first batch")
        epoch = cluster.leader().epoch
        cluster.leader_proc().kill()
        _new_leader(cluster, epoch)
        open_gate(gate)
        cluster.wait_status("story3", {"FINISHED", "FAILED", "CANCELED"}, timeout=300)
    assert cluster.job("story3").status == "FINISHED", cluster.job("story3").error_msg
    ids = sum((written_ids(f"{out}/p{p}") for p in range(5)), start=written_ids(out + "/none"))
    assert_exactly(ids, range(1000))
    assert watch.max_seen <= 1
    assert_never_resurrected(cluster, "story3")


def _last_checkpoint(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["checkpoint"]["lastCheckpointId"] or 0


# In the soak set (CI time): CI kills a worker under a running job in tests/cluster/test_liveness.py
# (replaced on another worker, both stores), and kills workers in the short chaos run, whose
# checker wants every id once (tests/testing/test_chaos.py).
@pytest.mark.soak
@sqlite_only
def test_job_moves_to_another_worker_when_its_worker_dies(cluster: Cluster, tmp_path):
    """Story 5a: the worker is killed (its driver dies with it); the job resumes elsewhere."""
    cluster.coordinator("c1")
    # w1's driver commits four batches of eight, then holds the fifth: surely mid-way when
    # w1 is killed, however fast the host.
    w1 = cluster.worker("w1", env=batch_gate(str(tmp_path / "never-opened"), passes=4))
    out = str(tmp_path / "out")
    with DriverWatch("story5") as watch:
        cluster.submit(batch_job(out, rows=800, rows_per_batch=100), "story5")
        wait_for(lambda: _committed_rows(cluster, "story5")[0] >= 400, 180, message="progress on w1")
        cluster.worker("w2")
        w1.kill()
        wait_for(lambda: driver_pids("story5") == [] or len(cluster.attempts("story5")) > 1, 10,
                 message="the driver to die with its worker")
        cluster.wait_status("story5", {"FINISHED", "FAILED"}, timeout=300)
    job = cluster.job("story5")
    assert job.status == "FINISHED", job.error_msg
    attempts = cluster.attempts("story5")
    assert attempts[0].worker_id == "w1" and attempts[-1].worker_id == "w2"
    assert_exactly(written_ids(out + "/p0"), range(800))
    assert watch.max_seen <= 1
    assert_never_resurrected(cluster, "story5")


@postgresql_only
def test_job_without_retries_fails_for_good_when_its_worker_dies(cluster: Cluster, tmp_path):
    """Story 5b: job.retry.times = 0: FAILED, and never restarted after later failovers."""
    cluster.coordinator("c1")
    cluster.coordinator("c2")
    w1 = cluster.worker("w1")
    cluster.worker("w2")
    out = str(tmp_path / "out")
    cluster.submit(streaming_job(out, retries=0), "story5b")
    cluster.wait_status("story5b", "RUNNING", timeout=120)
    victim = w1 if cluster.attempts("story5b")[0].worker_id == "w1" else next(p for p in cluster.procs if p.name == "w2")
    victim.kill()
    job = cluster.wait_status("story5b", {"FAILED"}, timeout=60)
    assert "lost" in (job.error_msg or "")
    for _ in range(2):
        epoch = cluster.leader().epoch
        cluster.leader_proc().kill()
        cluster.coordinator(f"c{epoch + 10}")
        _new_leader(cluster, epoch)
    cluster.leader_has_reconciled(1.5)
    assert cluster.job("story5b").status == "FAILED"
    assert len(cluster.attempts("story5b")) == 1
    assert driver_pids("story5b") == []
    assert_never_resurrected(cluster, "story5b")


# Stories 4 and 6 in one run (one driver's Spark start for both; CI time).
@sqlite_only
def test_new_leader_reattaches_to_running_driver_that_kept_checkpointing(cluster: Cluster, tmp_path):
    """Story 4: a streaming job stays RUNNING; with its leader killed, its checkpoint id grows
    within 3 intervals. Story 6: after two failovers: the same driver, no second driver, no
    restart, and progress."""
    # The shipped heartbeat and self-fence times (seatide.timeouts.Timeouts), not the suite's short
    # ones: "no restart" is the claim, and with a 3 s self-fence a driver starved behind the new
    # leader's 4 s step on SQLite at load 20 fenced itself, as it must (exit 75, an uncharged retry):
    # the story's subject is a failover, not a stall longer than the driver is told to bear.
    cluster.timeouts = {"driver": 10.0, "worker": 10.0, "self_fence": 6.0, "interval": 1.0}
    cluster.coordinator("c1")
    cluster.coordinator("c2")
    cluster.worker("w1")
    out = str(tmp_path / "out")
    with DriverWatch("story6") as watch:
        cluster.submit(streaming_job(out, interval_ms=1000), "story6")
        cluster.wait_status("story6", "RUNNING", timeout=120)
        wait_for(lambda: _last_checkpoint(cluster, "story6") >= 2, 120, message="checkpoints")
        pid = wait_for(lambda: driver_pids("story6"), 30)[0]
        for failover in range(2):
            epoch = cluster.leader().epoch
            cluster.leader_proc().kill()
            killed_at = time.time()
            if failover == 0:       # story 4: no leader for now (c2 takes the lease within its TTL)
                before = _last_checkpoint(cluster, "story6")
                wait_for(lambda: _last_checkpoint(cluster, "story6") > before, 3 * 1.0 + 2, interval=0.1,
                         message="a new checkpoint within three intervals")
            _new_leader(cluster, epoch)
            assert cluster.job("story6").status == "RUNNING"
            assert time.time() - killed_at < 15
            if failover == 0:
                cluster.coordinator(f"c{epoch + 10}")      # the next failover's standby
        before = _last_checkpoint(cluster, "story6")
        wait_for(lambda: _last_checkpoint(cluster, "story6") > before, 30, message="progress after failovers")
    assert driver_pids("story6") == [pid]
    assert len(cluster.attempts("story6")) == 1
    assert cluster.job("story6").status == "RUNNING"
    assert watch.max_seen == 1


@postgresql_only
def test_hung_driver_is_killed_and_replaced(cluster: Cluster, tmp_path):
    """Story 7: a driver that is alive but silent (SIGSTOP) is detected, killed and replaced."""
    cluster.timeouts["driver"] = 5.0
    c1, w1 = cluster.coordinator("c1", wait=False), cluster.worker("w1", wait=False)   # side by side
    cluster.wait_serving(c1)
    cluster.wait_registered(w1)
    out = str(tmp_path / "out")
    with DriverWatch("story7") as watch:
        cluster.submit(streaming_job(out), "story7")
        cluster.wait_status("story7", "RUNNING", timeout=120)
        # A cold driver's start, not the story's window: over 60 s at load 10 on two cores
        # (stress-ng --cpu 2 beside the suite, 2026-11-30), so as long as other tests allow it.
        wait_for(lambda: _last_checkpoint(cluster, "story7") >= 1, 240, message="a first checkpoint")
        pid = driver_pids("story7")[0]
        # The attempt that runs it: at load 10 an earlier one may have failed by itself and been
        # retried before (a Python worker that did not connect back), so "a second attempt" is not
        # yet a replacement.
        hung = next(a for a in cluster.attempts("story7") if a.pid == pid)
        os.kill(pid, signal.SIGSTOP)
        # shown with the processes' logs if the window below fails: where the seconds went
        print(f"SIGSTOP driver pid {pid} at {datetime.now(timezone.utc):%H:%M:%S,%f} UTC")
        # Replaced within the hung-driver timeout (5 s) and 5 more for the leader to act: a tick
        # marks the attempt lost and kills the driver, the worker records its exit, a tick schedules
        # the retry (job.retry.interval.seconds = 1), a tick creates the attempt. 6.3-7.2 s at load
        # 8-10 (the last three steps 1.4-1.7 s); at load 20-30 each step waits for a starved process.
        wait_for(lambda: [a for a in cluster.attempts("story7") if a.attempt_id > hung.attempt_id], 5.0 + 5,
                 interval=0.1, message="a replacement attempt")
        assert exited(pid), "the hung driver was not killed"
        wait_for(lambda: [p for p in driver_pids("story7") if p != pid], 30, message="a new driver")
        before = _last_checkpoint(cluster, "story7")
        wait_for(lambda: _last_checkpoint(cluster, "story7") > before, 240, message="the new driver checkpoints")
        cluster.cancel("story7")
        cluster.wait_status("story7", "CANCELED", timeout=60)
    [lost] = [a for a in cluster.attempts("story7") if a.attempt_id == hung.attempt_id]
    assert lost.state == "LOST" and "hung" in lost.error
    assert watch.max_seen <= 1
    assert_exactly_prefix(written_ids(out))


def assert_exactly_prefix(ids) -> None:
    """A stream stopped at any point has written ids 0..n-1, each once."""
    assert ids, "nothing written"
    assert_exactly(ids, range(max(ids) + 1))
