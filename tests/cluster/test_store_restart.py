"""The store's server ends sessions under a running cluster: one session at a time (issue 31),
then all of them in a restart (issue 21, finding 1). One job and one cluster for both stories:
a coordinator, two workers and a driver started once (CI's time; they were two tests).

PostgreSQL only: SQLite has no server, so no session of it is ever ended under a process
(no idle timer, no restart, no terminated backend).

One session: PostgreSQL ends the session of a process paused inside a transaction for longer
than ``idle_in_transaction_session_timeout`` (5 s, ``store/db.py``): the limit keeps a paused
lease holder from holding its locks for ever. The process itself is healthy. Here the real
leader, then the job's real driver, is held by a failpoint inside a transaction at a known
step (the failpoint, not timing, says where it is), frozen with SIGSTOP until the server has
ended that session (watched in ``pg_stat_activity``), then let go. It must take its step again
on a new session and go on: never fail the attempt, never count a reconcile error, the leader
keeps its lease.

All sessions: a PostgreSQL restart (or a managed failover, or ``pg_terminate_backend``) ends
every session, and with them the liveness locks of processes that are alive. A free lock alone
must never be taken as a worker's death while its drivers may still run: the job would get a
second driver on another worker. The server is restarted (fast shutdown) twice while the
process table is sampled: never two drivers for the job, checkpoints go on after each
restart, every id is written once, and no session the restarts ended counts as the job's
reconcile error.

Two restarts, not three: the first ends the sessions every process opened at its start, the
second ends the ones they took again after the first (the re-taken locks are as real as the
first ones). A third ends re-taken sessions again, as the second did: it repeats the second's
case (one more sample of the same race), at about 12 s of CI each.

The timeouts are the frozen processes' (below) for the restarts too: a restart's way through
(each worker has its lock back with a heartbeat, or its drivers killed, within the confirmation
window less the margin; the leader believes a free lock only once it stayed free with no
heartbeat) reads only the heartbeat interval; the chaos run restarts the
server under the short ones (tests/testing/test_chaos.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from sqlalchemy import text

from seatide.store.paths import driver_log_path
from seatide.testing.driver_processes import DriverWatch
from seatide.testing.cluster import Cluster, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, streaming_job, written_ids
from seatide.testing.servers import PrivatePostgres

RESTARTS = 2
# A pause of about the idle limit (5 s) must not also be a self-fence or a lost lease: these
# keep the driver's self-fence (8 s) and, for the leader, its lease (12 s) beyond it, so the
# test sees the step taken again rather than the process fenced.
PAUSE_TIMEOUTS = {"driver": 12.0, "worker": 12.0, "self_fence": 8.0, "interval": 0.5}
LONG_LEASE = ["--lease-ttl", "12", "--lease-renew", "1"]
# The driver commits this batch (so it is past its start), then is held in its next read of a
# decision: a batch before the freeze and two after it (one, not three, before: CI time).
HELD_BATCHES = 1
JOB = "restarts"


@pytest.fixture
def restartable_store(tmp_path):
    server = PrivatePostgres().start()
    try:
        yield server
    finally:
        server.stop()


def _checkpoints(cluster: Cluster, job_id: str) -> int:
    try:
        return cluster.last_checkpoint(job_id)
    except Exception:          # the store is restarting: no answer yet
        return -1


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


def _read(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()


def _frozen_leader_and_driver_go_on(cluster: Cluster, leader, leader_gate: str, driver_gate: str) -> None:
    """The leader held at its first decision's transaction (the job's row and the lease row
    locked FOR UPDATE), then the job's driver held inside a read of a batch's decision."""
    backend = wait_for(lambda: _held_backend(cluster, "SELECT jobs.job_id, %FOR UPDATE"), 120,
                       message="the leader held inside its first decision's transaction")
    epoch = cluster.leader().epoch
    _freeze_until_the_server_ends(cluster, leader.popen.pid, backend, leader_gate)

    backend = wait_for(lambda: _held_backend(cluster, "SELECT sink_manifests.status%"), 240,
                       message="the driver held inside its read of a batch's decision")
    [attempt] = cluster.attempts(JOB)
    _freeze_until_the_server_ends(cluster, attempt.pid, backend, driver_gate)
    held_at = cluster.last_checkpoint(JOB)
    wait_for(lambda: cluster.last_checkpoint(JOB) >= held_at + 2, 120, interval=0.25,
             message="checkpoints after the driver was let go")

    assert [(a.attempt_id, a.state) for a in cluster.attempts(JOB)] == [(attempt.attempt_id, "RUNNING")]
    assert [e for e in cluster.events(JOB) if e.kind in ("ATTEMPT_FAILED", "RECONCILE_ERROR")] == []
    assert cluster.leader().epoch == epoch, "the leader lost its lease"
    leader_log = _read(leader.log_path)
    assert "taken again on a new session" in leader_log and "reconcile tick failed" not in leader_log
    assert "taken again on a new session" in _read(driver_log_path(cluster.data_dir, JOB, attempt.attempt_id))


@pytest.mark.cluster
def test_sessions_the_stores_server_ends_never_fail_the_job_nor_give_it_two_drivers(restartable_store, tmp_path,
                                                                                    capsys):
    url = f"postgresql://postgres@127.0.0.1:{restartable_store.port}/postgres"
    cluster = Cluster(url, str(tmp_path / "data"), timeouts=PAUSE_TIMEOUTS)
    out, leader_gate, driver_gate = str(tmp_path / "out"), str(tmp_path / "leader-gate"), str(tmp_path / "driver-gate")
    try:
        # Side by side, then waited for: each spends seconds importing, one after the other.
        c1 = cluster.coordinator("c1", extra=LONG_LEASE, wait=False,
                                 env={"SEATIDE_FAILPOINTS": f"coordinator.apply_after_read=gate:0:{leader_gate}"})
        # w2: where a wrong replacement (w1 taken for dead from its free lock) would be placed.
        # Cold, as w1: a cold driver names the job on its command line from its exec on, so
        # the watch sees it as soon as a warm driver's hand-over would show (no warm driver
        # was ever given an attempt here: every replacement went to w1), without the JVM an
        # idle warm driver holds for the whole test.
        w1 = cluster.worker("w1", wait=False)
        w2 = cluster.worker("w2", wait=False)
        cluster.wait_serving(c1)
        cluster.wait_registered(w1, w2)
        cluster.arm(JOB, f"driver.reading_decision=gate:{HELD_BATCHES}:{driver_gate}")   # on either worker
        cluster.submit(streaming_job(out, read_interval_ms=200), JOB)
        _frozen_leader_and_driver_go_on(cluster, c1, leader_gate, driver_gate)

        # The restarts begin once the job checkpoints (above), not after a count of checkpoints.
        back_after = []
        with DriverWatch(JOB, interval=0.2) as watch:
            for _ in range(RESTARTS):
                before = _checkpoints(cluster, JOB)
                restartable_store.restart_server("fast")
                restarted = time.monotonic()
                # Read from the store every 0.5 s: the API at 0.1 s cost the coordinator more CPU
                # than its own work; the time back is a measurement, to half a second.
                wait_for(lambda: _checkpoints(cluster, JOB) > before, 180, interval=0.5,
                         message="a checkpoint after the restart")
                back_after.append(time.monotonic() - restarted)
        cluster.cancel(JOB)
        cluster.wait_status(JOB, "CANCELED", timeout=120)
        ids = written_ids(out)
        assert ids, "nothing written"
        assert_exactly(ids, range(max(ids) + 1))
        assert watch.max_seen <= 1, f"{watch.max_seen} drivers of the job at once (pids {sorted(watch.pids_seen)})"
        # A session the restart ended is not the job's fault: the leader's tick is taken again
        # on a new session (store/sessions.py), never recorded as the job's reconcile error.
        errors = [e.detail for e in cluster.events(JOB) if e.kind == "RECONCILE_ERROR"]
        assert errors == [], errors
        with capsys.disabled():
            print(f"\nstore restart -> next checkpoint: {', '.join(f'{s:.1f} s' for s in back_after)}")
            if os.environ.get("SEATIDE_TEST_EVENTS"):
                for event in cluster.events(JOB):
                    print(f"{event.at:.1f} {event.kind} {event.actor} {event.detail[:200]}")
                print(cluster.logs())
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop_all()
