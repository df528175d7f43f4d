"""A follower that takes an expired lease after waiting for its row holds a lease that runs a
full ttl from when the row became its own, not one counted from before the wait.

A leader paused (SIGSTOP) inside a transaction on the lease row keeps a follower's election
waiting up to the store's idle limit. Stop 58's failure of
``tests/cluster/test_leader.py::test_paused_leader_changes_nothing_after_it_wakes[postgresql]``:
the follower's lease was stamped with the store time read before the wait, so it was born
expired, refused at the first renewal, and taken again under a new epoch.

PostgreSQL only: SQLite takes its write lock when the transaction begins, before anything is read.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text, update

from seatide.coordinator.lease import LeaderLease
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.testing.cluster import wait_for
from seatide.timeouts import Timeouts

QUICK = Timeouts(lease_ttl=1.0, lease_renew=0.25)


def _lease(store):
    with store.read() as conn:
        return conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).one()


def _waiting_on_a_lock(store) -> bool:
    with store.read() as conn:
        return conn.execute(text("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                                 "and datname = current_database()")).scalar() > 0


def test_a_lease_taken_after_a_lock_wait_runs_a_ttl_from_the_take(store_url):
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite's write lock is taken when the transaction begins: no wait on the row")
    store = open_store(store_url)
    holder = store.engine.connect()
    try:
        a = LeaderLease(store, "a", None, QUICK)
        assert a.tick() and a.is_leader
        with store.write() as conn:                 # a's lease is over by the store's clock
            conn.execute(update(s.leadership).where(s.leadership.c.id == 1).values(expires_at=0.0))
        first = _lease(store).epoch

        tx = holder.begin()                         # a paused holder's open transaction on the row
        holder.execute(select(s.leadership).where(s.leadership.c.id == 1).with_for_update()).one()
        b = LeaderLease(store, "b", None, QUICK)
        elected: list[bool] = []
        ticking = threading.Thread(target=lambda: elected.append(b.tick()), daemon=True)
        ticking.start()
        wait_for(lambda: _waiting_on_a_lock(store), 10, message="b's election never waited for the row")
        # hold the row for longer than two ttls by the store's clock, then let b in
        with store.read() as conn:
            held_from = read_store_now(conn)
        wait_for(lambda: _store_time(store) > held_from + 2 * QUICK.lease_ttl, 10,
                 message="the store's clock did not move on")
        released_at = _store_time(store)
        tx.rollback()
        ticking.join(10)
        assert elected == [True], "b did not take the expired lease once the row was free"

        row = _lease(store)
        assert (row.node_id, row.epoch) == ("b", first + 1)
        assert row.acquired_at >= released_at, "the lease was counted from before the lock wait"
        assert row.expires_at > _store_time(store), "b's lease was born expired"
        assert b.tick() and b.epoch == first + 1, "b lost the lease it had just taken"
        assert _lease(store).epoch == first + 1
    finally:
        holder.close()
        store.dispose()


def _store_time(store) -> float:
    with store.read() as conn:
        return read_store_now(conn)
