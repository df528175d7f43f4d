"""The control plane compares instants on one clock, the store's (issue 21, finding 2).

The store is a private PostgreSQL whose clock runs 8 s ahead of (or behind) every SeaTide
process (its ``clock_timestamp()`` moved, ``PrivatePostgres.clock_offset``: libfaketime on the
server made PostgreSQL's own timers fire up to 8 s early, and ended healthy sessions for
idle-in-transaction; inside the JVM it made Spark fail to start).
A healthy STREAMING job checkpointing every second is never flagged stale, however the
clocks disagree; once its sink hangs it is flagged within its window (+ 3 s), restarted by
the default policy, and every id is still written once. Before, stamps written with each
process's own clock opened the window 8 s early (a healthy job flagged stale at once, then
restarted until it FAILED) or 8 s late (a stall seen only after window + 8 s).
"""

from __future__ import annotations

import os
import time

import pytest

from sqlalchemy import func, select

from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.cluster import Cluster, batch_gate, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, streaming_job, written_ids
from seatide.testing.servers import PrivatePostgres

# Wide enough that a loaded 2-core machine checkpoints well within it while healthy; the skew
# (8 s) still shows as the stall flagged 8 s early or late.
WINDOW_S = 20.0
# Checkpoints every second, then the sink hangs. Four, not twelve: a skewed clock flagged a healthy
# job in its first window (the start-up and first micro-batch, 8 s early); once it checkpoints
# every second, a checkpoint's age stays near 1 s + the 8 s skew, far inside the window, however
# long it goes on. The stall itself is timed from the last healthy checkpoint, as before.
HEALTHY_BATCHES = 4


# The store 8 s ahead (a healthy job never flagged) is in the soak set (CI time); CI runs the
# store behind, where a stall must still be seen on time.
@pytest.fixture(params=[pytest.param("+8s", marks=pytest.mark.soak), "-8s"], ids=["store-ahead", "store-behind"])
def skewed_store(request):
    server = PrivatePostgres(clock_offset=request.param).start()
    try:
        yield server
    finally:
        server.stop()


def _stale_flags(cluster: Cluster, job_id: str) -> int:
    """Counted by the store: polled every 0.2 s, the job's whole event log read each time cost more."""
    with cluster.store.read() as conn:
        return conn.execute(select(func.count()).select_from(s.events).where(
            s.events.c.job_id == job_id, s.events.c.kind == "CHECKPOINT_STALE")).scalar()


def test_a_store_with_a_skewed_clock_ends_no_session_idle_in_a_transaction_for_a_moment(skewed_store):
    """The fake must not break the server. Under libfaketime PostgreSQL's alarm handler saw
    the real clock: the alarm a session armed for its idle-in-transaction limit (5 s) went off
    5 s later, and whatever transaction the session sat idle in at that moment was ended, after
    a moment of idleness. In CI once the test's own read, once a driver's, whose attempt then
    failed of it. Here transactions idle for 0.3 s each, one after another, for 6 s."""
    store = open_store(f"postgresql://postgres@127.0.0.1:{skewed_store.port}/postgres")
    try:
        until = time.monotonic() + 6.0
        while time.monotonic() < until:
            with store.read() as conn:
                conn.execute(select(1))
                time.sleep(0.3)
                conn.execute(select(1))
    finally:
        store.dispose()
    with open(os.path.join(skewed_store.root, "server.log"), encoding="utf-8", errors="replace") as log:
        assert "idle-in-transaction" not in log.read()


@pytest.mark.cluster
def test_a_stall_is_seen_on_time_and_a_healthy_job_never_whatever_the_stores_clock(skewed_store, tmp_path):
    cluster = Cluster(f"postgresql://postgres@127.0.0.1:{skewed_store.port}/postgres", str(tmp_path / "data"))
    out, gate = str(tmp_path / "out"), str(tmp_path / "gate")
    job = streaming_job(out, read_interval_ms=200).replace(
        "job.retry.times = 3", f"job.retry.times = 3\n  checkpoint.stale-after = {int(WINDOW_S * 1000)}")
    try:
        cluster.coordinator("c1")
        # Each driver commits HEALTHY_BATCHES micro-batches, then its sink hangs (held until the gate opens).
        cluster.worker("w1", env=batch_gate(gate, passes=HEALTHY_BATCHES))
        cluster.submit(job, "skew")
        first = wait_for(lambda: next(iter(cluster.attempts("skew")), None), 60, message="an attempt")
        # Healthy: checkpoints every second, never flagged, until this attempt's sink hangs.
        wait_for(lambda: cluster.last_checkpoint("skew") >= HEALTHY_BATCHES - 2,
                 240, interval=0.1, message="the healthy checkpoints")
        assert _stale_flags(cluster, "skew") == 0, "a healthy job was flagged stale"
        seen_after = _stall_seen_after(cluster, "skew")
        assert WINDOW_S - 1.5 <= seen_after <= WINDOW_S + 3.0, f"flagged {seen_after:.1f} s after the sink hung"
        # The default policy restarts it: a new attempt checkpoints again.
        wait_for(lambda: any(a.attempt_id != first.attempt_id and a.state == "RUNNING"
                             for a in cluster.attempts("skew")), 120,
                 message="a new attempt running")
        assert "checkpoint stale" in cluster.attempts("skew")[0].error
        open_gate(gate)
        cluster.cancel("skew")
        assert cluster.wait_status("skew", {"CANCELED", "FAILED"}, timeout=120).status == "CANCELED"
        ids = written_ids(out)
        assert ids, "nothing written"
        assert_exactly(ids, range(max(ids) + 1))
        print(f"\nstore clock {skewed_store.clock_offset}: stall flagged {seen_after:.1f} s after the sink hung "
              f"(window {WINDOW_S:g} s)")
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop_all()


def _stall_seen_after(cluster: Cluster, job_id: str) -> float:
    """Seconds from the last checkpoint the test saw land (by its own clock) to the stale flag."""
    deadline = time.monotonic() + 240
    last_id, last_seen = -1, time.monotonic()
    while time.monotonic() < deadline:
        checkpoint = cluster.last_checkpoint(job_id)   # the store's: a loaded API may answer late
        now = time.monotonic()
        if checkpoint != last_id:
            last_id, last_seen = checkpoint, now
        if _stale_flags(cluster, job_id):
            return now - last_seen
        # Each end of the measure is seen up to a poll late: 0.2 s, against bounds of -1.5 and +3 s.
        time.sleep(0.2)
    raise AssertionError("the stalled job was never flagged stale")
