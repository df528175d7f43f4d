"""A store session the server ends is transient for the process that used it (issue 31).

PostgreSQL ends the session of a process paused inside a transaction for longer than
``idle_in_transaction_session_timeout`` (5 s, ``store/db.py``): the limit keeps a paused
lease holder from holding its locks for ever. The process itself is healthy. Here a real
leader, then a real driver, is held by a failpoint inside a transaction at a known step
(the failpoint, not timing, says where it is), frozen with SIGSTOP until the server has
ended that session (watched in ``pg_stat_activity``), then let go. It must take its step
again on a new session and go on (or be fenced by the usual rule): never fail the attempt,
never count a reconcile error.

PostgreSQL only: SQLite has no server, so no session of it is ever ended under a process
(no idle timer, no restart, no terminated backend).
"""

from __future__ import annotations

import os
import signal

import pytest
from sqlalchemy import text

from seatide.testing.cluster import Cluster, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, streaming_job, written_ids
from tests.stores import postgresql_only

pytestmark = [pytest.mark.cluster, postgresql_only]

# A pause of about the idle limit (5 s) must not also be a self-fence or a lost lease: these
# keep the driver's self-fence (8 s) and, for the leader, its lease (12 s) beyond it, so the
# test sees the step taken again rather than the process fenced.
PAUSE_TIMEOUTS = {"driver": 12.0, "worker": 12.0, "self_fence": 8.0, "interval": 0.5}
LONG_LEASE = ["--lease-ttl", "12", "--lease-renew", "1"]
# The driver commits this batch (so it is past its start), then is held in its next read of a
# decision: a batch before the freeze and two after it (one, not three, before: CI time).
HELD_BATCHES = 1


def _held_backend(cluster: Cluster, query_like: str) -> int | None:
    """The server pid of a session idle inside a transaction for over a second after a
    statement like ``query_like``: the process held there by the failpoint."""
    with cluster.store.read() as conn:
        return conn.execute(text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND "
            "state = 'idle in transaction' AND query LIKE :q AND clock_timestamp() - state_change > interval '1 s'"),
            {"q": query_like}).scalar()


def _session_ended(cluster: Cluster, backend: int) -> bool:
    with cluster.store.read() as conn:
        return conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"),
                            {"pid": backend}).scalar() == 0


def _freeze_until_the_server_ends(cluster: Cluster, pid: int, backend: int, gate: str) -> None:
    """SIGSTOP ``pid`` until the server has ended its session ``backend``; then let it go."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _session_ended(cluster, backend), 30, interval=0.1,
                 message="the server ending the frozen process's session")
    finally:
        open_gate(gate)
        os.kill(pid, signal.SIGCONT)


def _last_checkpoint(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["checkpoint"]["lastCheckpointId"] or 0


def _store_errors(cluster: Cluster, job_id: str) -> list:
    return [e for e in cluster.events(job_id) if e.kind in ("ATTEMPT_FAILED", "RECONCILE_ERROR")]


def _log(cluster: Cluster, name: str) -> str:
    proc = next(p for p in cluster.procs if p.name == name)
    with open(proc.log_path, errors="replace") as handle:
        return handle.read()


def _driver_log(cluster: Cluster, job_id: str, attempt_id: int) -> str:
    from seatide.store.paths import driver_log_path

    with open(driver_log_path(cluster.data_dir, job_id, attempt_id), errors="replace") as handle:
        return handle.read()


def test_a_leader_and_a_driver_frozen_inside_a_transaction_past_the_idle_limit_go_on(cluster: Cluster, tmp_path):
    """One job meets both: the leader held at its first decision's transaction (the job's row
    and the lease row locked FOR UPDATE), then the job's driver held inside a read of a
    batch's decision. One cluster for the two: CI's time."""
    cluster.timeouts = PAUSE_TIMEOUTS
    out, leader_gate, driver_gate = str(tmp_path / "out"), str(tmp_path / "leader-gate"), str(tmp_path / "driver-gate")
    leader = cluster.coordinator("c1", extra=LONG_LEASE,
                                 env={"SEATIDE_FAILPOINTS": f"coordinator.apply_after_read=gate:0:{leader_gate}"})
    cluster.worker("w1", env={"SEATIDE_FAILPOINTS": f"driver.reading_decision=gate:{HELD_BATCHES}:{driver_gate}"})
    cluster.submit(streaming_job(out, read_interval_ms=200), "frozen")
    backend = wait_for(lambda: _held_backend(cluster, "SELECT jobs.job_id, %FOR UPDATE"), 120,
                       message="the leader held inside its first decision's transaction")
    epoch = cluster.leader().epoch
    _freeze_until_the_server_ends(cluster, leader.popen.pid, backend, leader_gate)

    backend = wait_for(lambda: _held_backend(cluster, "SELECT sink_manifests.status%"), 240,
                       message="the driver held inside its read of a batch's decision")
    [attempt] = cluster.attempts("frozen")
    _freeze_until_the_server_ends(cluster, attempt.pid, backend, driver_gate)
    held_at = _last_checkpoint(cluster, "frozen")
    wait_for(lambda: _last_checkpoint(cluster, "frozen") >= held_at + 2, 120, interval=0.1,
             message="checkpoints after the driver was let go")

    assert [(a.attempt_id, a.state) for a in cluster.attempts("frozen")] == [(attempt.attempt_id, "RUNNING")]
    assert _store_errors(cluster, "frozen") == []
    assert cluster.leader().epoch == epoch, "the leader lost its lease"
    leader_log = _log(cluster, "c1")
    assert "taken again on a new session" in leader_log and "reconcile tick failed" not in leader_log
    assert "taken again on a new session" in _driver_log(cluster, "frozen", attempt.attempt_id)
    cluster.cancel("frozen")
    assert cluster.wait_status("frozen", {"CANCELED", "FAILED"}, timeout=120).status == "CANCELED"
    ids = written_ids(out)
    assert ids, "nothing written"
    assert_exactly(ids, range(max(ids) + 1))
