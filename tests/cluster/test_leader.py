"""The leader lease and fencing: on the store, and with real coordinator processes."""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import insert, select

from seatide.coordinator.lease import LeaderLease
from seatide.store import schema as s
from seatide.store.clock import CLOCK_SKEW_ENV
from seatide.store.events import record_event
from seatide.store.db import NotLeader, open_store
from seatide.timeouts import Timeouts
from seatide.store.states import JOB_TERMINAL
from seatide.testing.cluster import Cluster, http, wait_for
from seatide.testing.jobs import batch_job


def test_epochs_grow_and_an_old_epoch_cannot_write(store_url):
    store = open_store(store_url)
    settings = Timeouts(lease_ttl=0.6, lease_renew=0.2)
    a, b = LeaderLease(store, "a", None, settings), LeaderLease(store, "b", None, settings)
    assert a.tick() and not b.tick()
    assert a.gained.is_set()
    old = a.epoch
    with store.leader_tx(old) as conn:
        record_event(conn, "TEST", "a", epoch=old)
    # a stops renewing (paused); b takes over once the lease expires
    wait_for(lambda: b.tick(), 5, interval=0.05, message="b to take the expired lease")
    assert b.epoch == old + 1
    with pytest.raises(NotLeader):
        with store.leader_tx(old) as conn:
            conn.execute(insert(s.events).values(at=time.time(), kind="ZOMBIE", detail="{}", epoch=old, actor="a"))
    with store.read() as conn:
        assert conn.execute(select(s.events).where(s.events.c.kind == "ZOMBIE")).first() is None
    assert not a.tick() or a.epoch != old     # a, waking up, must not act with its old epoch
    assert not a.is_leader
    store.dispose()


def test_paused_leader_changes_nothing_after_it_wakes(cluster: Cluster):
    c1 = cluster.coordinator("c1")
    wait_for(lambda: cluster.leader().node_id == "c1", 10, message="c1 leads")
    cluster.coordinator("c2")
    epoch = cluster.leader().epoch
    c1.kill(signal.SIGSTOP)
    wait_for(lambda: cluster.leader().epoch > epoch, 10, message="c2 takes over")
    paused_until = time.time()
    c1.kill(signal.SIGCONT)
    cluster.leader_has_reconciled(2.0)
    stale = [e for e in cluster.events() if e.epoch == epoch and e.at > paused_until]
    assert stale == [], f"the paused leader wrote after waking: {stale}"
    assert cluster.leader().node_id == "c2"
    assert c1.alive and http("GET", c1.url + "/api/v1/overview")[1]["leader"]["nodeId"] == "c2"


def clock_skewed_by(seconds: float) -> dict:
    """A process whose wall clock is off by ``seconds``, as on a host with a wrong clock."""
    return {CLOCK_SKEW_ENV: str(seconds)}


# The lease alone, as for a partitioned leader: a killed one would otherwise be replaced at
# once through its liveness lock (test_liveness.py), before the clock is ever consulted.
LEASE_ONLY = {"SEATIDE_LIVENESS_LOCKS": "0"}


def _node_beats(cluster: Cluster, node_id: str, seen: set) -> int:
    with cluster.store.read() as conn:
        seen.add(conn.execute(select(s.nodes.c.heartbeat_at).where(s.nodes.c.node_id == node_id)).scalar())
    return len(seen)


@pytest.mark.parametrize("skew", [+30.0, -30.0])
def test_a_coordinator_with_a_skewed_clock_never_makes_two_leaders_and_fails_over(cluster: Cluster, skew):
    """The lease is judged by the store's clock: a coordinator whose clock runs 30 s ahead
    does not take a lease its holder renews, and one 30 s behind does not wait 30 s more
    before it replaces a dead leader."""
    if cluster.store.is_sqlite:
        pytest.skip("a SQLite store is on one host: its processes share one clock")
    cluster.coordinator("c1", env=LEASE_ONLY)
    wait_for(lambda: cluster.leader().node_id == "c1", 10, message="c1 leads")
    epoch = cluster.leader().epoch
    cluster.coordinator("c2", env={**clock_skewed_by(skew), **LEASE_ONLY})
    beats: set = set()
    # c2 ticks its lease four times per heartbeat: four heartbeats are over a dozen tries.
    wait_for(lambda: _node_beats(cluster, "c2", beats) >= 4, 30, message="c2 to run a while")
    held = cluster.leader()
    assert (held.node_id, held.epoch) == ("c1", epoch), "c2 took a lease c1 was renewing"
    assert [e.actor for e in cluster.events() if e.kind == "LEADER_ELECTED"] == ["coordinator:c1"]

    next(p for p in cluster.procs if p.name == "c1").kill()
    killed_at = time.monotonic()
    last = cluster.leader()              # c1 is dead: this expiry is final
    assert last.node_id == "c1"
    taken = wait_for(lambda: (lambda l: l if l.node_id == "c2" else None)(cluster.leader()), 15,
                     interval=0.05, message="c2 to take over")
    failover = time.monotonic() - killed_at
    assert taken.epoch == epoch + 1
    assert taken.acquired_at >= last.expires_at, "c2 took the lease before it expired by the store's clock"
    # lease ttl 2 s + a lease tick (0.25 s) + scheduling; not 30 s more, whichever way the clock is off.
    assert failover < 2.0 + 1.5, f"failover took {failover:.1f} s"
    cluster.leader_has_reconciled(1.0)
    print(f"skew {skew:+g} s: failover in {failover:.2f} s")


def test_a_leader_whose_clock_runs_ahead_judges_heartbeats_by_the_store_and_runs_a_job(cluster: Cluster, tmp_path):
    """Heartbeats are stamped and judged by the store's clock: a leader 30 s ahead of its
    worker and driver does not take them for lost, and a job runs to its end once."""
    if cluster.store.is_sqlite:
        pytest.skip("a SQLite store is on one host: its processes share one clock")
    cluster.coordinator("c1", env=clock_skewed_by(+30))
    cluster.worker("w1")
    cluster.submit(batch_job(str(tmp_path / "out"), rows=50), "skewed-leader")
    assert cluster.wait_status("skewed-leader", JOB_TERMINAL, timeout=180).status == "FINISHED"
    assert [(a.state, a.error) for a in cluster.ended_attempts("skewed-leader")] == [("SUCCEEDED", None)]
    assert not [e for e in cluster.events() if e.kind == "ATTEMPT_LOST"]
