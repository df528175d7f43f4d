"""An older coordinator still running after revision 0022 keeps the leader liveness lock of its version for good
(outside review of leasemove, second round, M1): its election takes the lock, then fails on the missing
``leader_lease``, and its tick keeps the lock. The lease moved to a new lock name with its table
(store/liveness.py ``LEADER``), so the older process holds only the old one, harmlessly: a leader of this version
still holds its own lock and says so, and its crash is still seen at once.

The older coordinator is this package's lease code as that version had it (tests/store/older_lease.py
``before_0022``: the old table and the old lock's name).
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import and_, select

from seatide.coordinator.lease import LeaderLease
from seatide.store import schema as s
from seatide.store.db import Store, open_store
from seatide.store.liveness import liveness_for
from seatide.testing.cluster import wait_for
from seatide.timeouts import Timeouts
from tests.cluster.test_liveness import _lose_session
from tests.store.older_lease import before_0022

# The lease outlasts the test: a takeover within it is the liveness lock's shortcut, never the expiry.
LONG = Timeouts(lease_ttl=600.0, lease_renew=1.0)


def test_an_older_follower_holding_its_lock_leaves_this_versions_leader_its_lock_and_prompt_takeover(store_url):
    store = open_store(store_url)                       # at 0022: nobody has led
    older_store = Store(store_url)
    older_locks = liveness_for(older_store, LONG)
    older = LeaderLease(older_store, "older-c", None, LONG, older_locks)
    locks = [liveness_for(store, LONG), liveness_for(store, LONG)]
    try:
        with before_0022():
            for _ in range(3):                          # its elections fail on leader_lease; it keeps its lock
                assert not older.tick()
        assert older._locked

        leader = LeaderLease(store, "new-c", None, LONG, locks[0])
        assert leader.tick()
        with store.read() as conn:
            assert conn.execute(select(s.leadership.c.node_id, s.leadership.c.liveness)).one() == ("new-c", True)
        with before_0022():
            assert not older.tick() and older._locked

        follower = LeaderLease(store, "follower-c", None, LONG, locks[1])
        assert not follower.tick()
        _lose_session(locks[0])                         # this version's leader dies: its lock is free at once
        wait_for(follower.tick, timeout=10, interval=0.05, message="the follower to take over by the freed lock")
        with store.read() as conn:
            why = json.loads(conn.execute(select(s.events.c.detail).where(and_(
                s.events.c.kind == "LEADER_ELECTED", s.events.c.epoch == follower.epoch))).scalar())["why"]
        assert (follower.epoch, why) == (leader.epoch + 1, "holder's liveness lock released")
        follower.resign()
    finally:
        for held in (*locks, older_locks):
            held.close()
        older_store.dispose()
        store.dispose()
