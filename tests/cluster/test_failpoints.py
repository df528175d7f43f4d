"""Every failpoint armed: a crash (and, where a process survives it, an error) at each step
that writes state or has a side effect, in real coordinators, workers and drivers.

One run arms them all at once, each firing once (``once:ACTION:MARKER``), so a single job
meets a crash of its worker after the claim, of the next worker after the launch, of its
drivers at their first heartbeat, after a sink commit and before a pipeline end, and of
leaders at a lease renewal, at the terminal status and before cleanup. It must still end
FINISHED, cleaned up, with every row written once.
"""

from __future__ import annotations

import os
import re

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.cluster import Cluster, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, written_ids
from tests.stores import postgresql_in_ci, postgresql_only, sqlite_only

pytestmark = pytest.mark.cluster

SOURCE = os.path.join(os.path.dirname(__file__), "..", "..", "src", "seatide")

# process that dies -> failpoints it holds
KILLS = {
    "worker": ["worker.after_claim", "worker.after_launch"],
    "driver": ["driver.after_first_heartbeat", "driver.after_sink_commit", "driver.before_pipeline_end"],
    "coordinator": ["coordinator.before_lease_renew", "coordinator.after_terminal_status",
                    "coordinator.before_cleanup"],
}
# process that hangs (alive, silent or stuck) -> failpoints it holds. A hung worker stops
# heartbeating once its loop has made no step for --launch-timeout (short here); a hung driver
# either stops heartbeating (the heartbeat thread) or keeps heartbeating with its work stuck
# (the progress watchdog's case);
# a hung leader stops renewing its lease. Not here: a driver hung after its first heartbeat,
# in its start-up, which is judged only after STARTUP_JUDGED_AFTER_S (10 min; the decision
# is tested in tests/coordinator/test_reconcile.py). It had passed here only when the
# driver that met it belonged to a worker about to be lost.
HANGS = {
    "worker": ["worker.after_claim", "worker.after_launch"],
    "driver": ["driver.before_sink_write", "driver.after_sink_commit",
               "driver.before_pipeline_end", "driver.after_end_attempt"],
    "coordinator": ["coordinator.before_lease_renew", "coordinator.after_terminal_status",
                    "coordinator.before_cleanup"],
}
# a failure the process survives: the step is retried (the job's retries, the lease's next
# renewal, cleanup's backoff)
ERRORS = ["driver.before_pipeline_end", "driver.after_sink_commit", "coordinator.before_lease_renew",
          "coordinator.before_cleanup"]


ROWS = 200


def _armed(action: str, points: list[str], markers: str) -> dict:
    return {"SEATIDE_FAILPOINTS": ",".join(f"{p}=once:{action}:{markers}/{p}" for p in points)}


def _cleaned(cluster: Cluster, job_id: str) -> bool:
    with cluster.store.read() as conn:
        result = conn.execute(select(s.job_results).where(s.job_results.c.job_id == job_id)).first()
    return result is not None and result.cleanup == "CLEAN"


def _run_through(cluster: Cluster, tmp_path, envs: list[tuple[str, dict]], job_id: str,
                 env_extra: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> None:
    cluster.cleanup_delay = 2.0
    # The first coordinator leads (it serves before the others start, the store's schema made);
    # the other coordinators and the workers then start side by side, each role waited for as a whole.
    (first, first_env), *others = [(name, env) for name, env in envs if name.startswith("c")]
    cluster.coordinator(first, env=first_env, extra=list(flags))
    coordinators = [cluster.coordinator(name, env=env, extra=list(flags), wait=False) for name, env in others]
    workers = [cluster.worker(name, env=env, extra=list(flags), wait=False)
               for name, env in envs if name.startswith("w")]
    if coordinators:
        cluster.wait_serving(*coordinators)
    cluster.wait_registered(*workers)
    out = str(tmp_path / "out")
    # every crash below costs the job an attempt: enough retries for all of them. Two
    # micro-batches: the point after a sink commit fires at the first, so an attempt resumes
    # mid-way and writes the second; more batches only add Spark work to every attempt.
    cluster.submit(batch_job(out, rows=ROWS, rows_per_batch=ROWS // 2, retries=10, env_extra=env_extra), job_id)
    # Each hang costs an attempt and its detection; at load 5-6 on 2 cores some attempts also
    # lose a Python worker to Spark's 10 s connect-back limit and retry: minutes in all.
    job = cluster.wait_status(job_id, {"FINISHED", "FAILED"}, timeout=600)
    assert job.status == "FINISHED", job.error_msg
    wait_for(lambda: _cleaned(cluster, job_id), 120, message="the job's cleanup")
    assert_exactly(written_ids(out + "/p0"), range(ROWS))
    assert not os.path.exists(cluster.checkpoint_dir(job_id))


def _at_every_failpoint(action: str, groups: dict, cluster: Cluster, tmp_path, job_id: str,
                        env_extra: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> None:
    """Every point of ``groups`` armed with ``action`` (once each) in four coordinators and
    three workers. The first leader is not armed at its lease renewal (it would stop before it
    served); the leaders after it are, and stop in turn at their first renewal, at the terminal
    status and before cleanup; a spare of each role is left to finish."""
    markers = str(tmp_path / "fired")
    os.makedirs(markers)
    points = [p for group in groups.values() for p in group]
    everything = _armed(action, points, markers)
    first = _armed(action, [p for p in points if p != "coordinator.before_lease_renew"], markers)
    envs = [("c1", first), ("c2", everything), ("c3", everything), ("c4", everything),
            ("w1", everything), ("w2", everything), ("w3", everything)]
    _run_through(cluster, tmp_path, envs, job_id=job_id, env_extra=env_extra, flags=flags)
    # The job can be cleaned up by a leader's first pass, before that leader's first renewal
    # (an armed point): that one fires within a renewal interval of the pass.
    wait_for(lambda: sorted(os.listdir(markers)) == sorted(points), 60,
             message="every failpoint reached")


# A kill at every failpoint on both stores: the fencing and liveness paths differ between
# SQLite and PostgreSQL, and a SIGKILL is where they differ. CI runs PostgreSQL (liveness locks
# and heartbeats); the SQLite run is in the soak set (CI time), and SQLite's SIGKILL paths stay
# in CI through a killed worker, leader and driver each (tests/cluster/test_liveness.py,
# test_failure_stories.py, tests/cli/test_local_run.py) and the errors' run below.
# A hang is judged by leases and heartbeats, read the same way from either store (a paused
# leader on each store: tests/cluster/test_liveness.py), and an error is retried by the
# process that met it: each runs on one store.
@postgresql_in_ci
def test_a_crash_at_every_failpoint_still_finishes_the_job_once(cluster: Cluster, tmp_path):
    _at_every_failpoint("kill", KILLS, cluster, tmp_path, "crashes")


# In the soak set (bash scripts/test -m soak): CI time; hangs stay in CI through tests/cluster/test_hung_jobs.py and the hung-driver story
@pytest.mark.soak
@postgresql_only
def test_a_hang_at_every_failpoint_is_routed_around_and_the_job_finishes_once(cluster: Cluster, tmp_path):
    # A driver stuck with its heartbeat going is seen by the progress watchdog, restarted.
    # A worker hung in a launch is replaced once its launch has timed out: 20 s, not 60.
    _at_every_failpoint("hang", HANGS, cluster, tmp_path, "hangs", env_extra=("job.progress-timeout = 30000",),
                        flags=("--launch-timeout", "20"))


@sqlite_only
def test_an_error_at_every_failpoint_that_can_raise_is_retried(cluster: Cluster, tmp_path):
    markers = str(tmp_path / "fired")
    os.makedirs(markers)
    armed = _armed("raise", ERRORS, markers)
    _run_through(cluster, tmp_path, [("c1", armed), ("w1", armed)], job_id="errors")
    assert sorted(os.listdir(markers)) == sorted(ERRORS)
    kinds = [e.kind for e in cluster.events("errors")]
    assert "RETRY_SCHEDULED" in kinds      # the driver's failures were retried, not fatal


def test_every_failpoint_in_the_code_is_armed_here():
    """A failpoint added to the code without a test that arms it fails this test."""
    in_code = set()
    for root, _, files in os.walk(SOURCE):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as handle:
                    in_code |= set(re.findall(r'failpoints\.hit\("([a-z_.]+)"', handle.read()))
    tests_dir = os.path.join(os.path.dirname(__file__), "..")
    armed_anywhere = set()
    for root, _, files in os.walk(tests_dir):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as handle:
                    text = handle.read()
                armed_anywhere |= {p for p in in_code if p in text}
    assert in_code - armed_anywhere == set()
    assert len(in_code) >= 15, sorted(in_code)


@sqlite_only
def test_a_worker_restarted_under_its_name_ends_what_its_earlier_process_launched(cluster: Cluster, tmp_path):
    """Found by the chaos runner: a worker killed between its claim and recording the driver's
    pid, then restarted under the same node id, left the attempt LAUNCHING with no pid. Nothing
    ever recorded its exit, so the job waited forever for a driver that had died with it
    (the leader starts no driver while the previous one may still run)."""
    markers = str(tmp_path / "fired")
    os.makedirs(markers)
    # A launch timeout far past the test's wait: the attempt must end because the worker
    # came back, not because its launch timed out.
    cluster.coordinator("c1", extra=["--launch-timeout", "900"])
    w1 = cluster.worker("w1", env=_armed("kill", ["worker.after_claim"], markers))
    out = str(tmp_path / "out")
    # one batch: the worker dies before any driver starts; the rows only show the job ran once
    cluster.submit(batch_job(out, rows=100), "orphan")
    wait_for(lambda: not w1.alive, 120, message="w1 killed right after its claim")
    cluster.restart(w1)
    job = cluster.wait_status("orphan", {"FINISHED", "FAILED"}, timeout=300)
    assert job.status == "FINISHED", job.error_msg
    first = cluster.attempts("orphan")[0]
    # Ended by the restarted worker: as FAILED if it came back within the worker timeout,
    # else the leader had already declared it LOST; either way its exit is now recorded.
    assert first.ended_at is not None and first.pid is None, first
    assert_exactly(written_ids(out + "/p0"), range(100))
