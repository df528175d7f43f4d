"""The leader lease and fencing: on the store, and with real coordinator processes."""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import insert, select

from seatide.coordinator.lease import LeaderLease, LeaseSettings
from seatide.store import schema as s
from seatide.store.db import NotLeader, open_store, record_event
from tests.cluster.harness import Cluster, http, wait_for


def test_epochs_grow_and_an_old_epoch_cannot_write(store_url):
    store = open_store(store_url)
    settings = LeaseSettings(ttl=0.6, renew_interval=0.2)
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
