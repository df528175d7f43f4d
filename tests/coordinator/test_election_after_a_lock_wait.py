"""A follower's election on PostgreSQL, against a holder paused inside a transaction on the lease row
and against its own slowness.

A leader paused (SIGSTOP) inside a transaction on the lease row keeps a follower's election waiting
up to the store's idle limit. Stop 58's failure of
``tests/cluster/test_leader.py::test_paused_leader_changes_nothing_after_it_wakes[postgresql]``: the
follower's lease was stamped with the store time read before that wait, so it was born expired,
refused at the first renewal, and taken again under a new epoch. The lease a follower takes after
such a wait must run a full ttl, by the store's clock and by its own, from when the row became its own.

And a follower slowed in its election must never lock a healthy leader's row (the outside review of
the fix: one read of the row and another of the store's clock let a stale expiry look past).

PostgreSQL only: SQLite takes its write lock when the transaction begins, before anything is read.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event, select, text, update

from seatide.coordinator.lease import LeaderLease
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.db import Store, open_store
from seatide.testing.cluster import wait_for
from seatide.timeouts import Timeouts

# A ttl long enough that a renewal right after an election lands on a loaded machine too.
TIMEOUTS = Timeouts(lease_ttl=3.0, lease_renew=0.5)


@pytest.fixture
def store(store_url):
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite's write lock is taken when the transaction begins: no wait on the row")
    st = open_store(store_url)
    yield st
    st.dispose()


def _lease(store):
    with store.read() as conn:
        return conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).one()


def _store_time(store) -> float:
    with store.read() as conn:
        return read_store_now(conn)


def _waiting_on_a_lock(store) -> bool:
    with store.read() as conn:
        return conn.execute(text("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                                 "and datname = current_database()")).scalar() > 0


def test_a_lease_taken_after_a_lock_wait_runs_a_ttl_from_the_take(store):
    holder = store.engine.connect()
    try:
        a = LeaderLease(store, "a", None, TIMEOUTS)
        assert a.tick() and a.is_leader
        with store.write() as conn:                 # a's lease is over by the store's clock
            conn.execute(update(s.leadership).where(s.leadership.c.id == 1).values(expires_at=0.0))
        first = _lease(store).epoch

        # a paused holder's open transaction on the row, which the server does not end on its own here
        tx = holder.begin()
        holder.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        holder.execute(select(s.leadership).where(s.leadership.c.id == 1).with_for_update()).one()
        b = LeaderLease(store, "b", None, TIMEOUTS)
        elected: list[bool] = []
        ticking = threading.Thread(target=lambda: elected.append(b.tick()), daemon=True)
        ticking.start()
        wait_for(lambda: _waiting_on_a_lock(store), 30, message="b's election never waited for the row")
        held_from = _store_time(store)              # held past a ttl and more, by the store's clock
        wait_for(lambda: _store_time(store) > held_from + TIMEOUTS.lease_ttl + 1, 30,
                 message="the store's clock did not move on")
        released_at = _store_time(store)
        tx.rollback()
        ticking.join(30)
        assert elected == [True], "b did not take the expired lease once the row was free"
        assert b.is_leader, "b's own clock counted its lease from before the wait"

        row = _lease(store)
        assert (row.node_id, row.epoch) == ("b", first + 1)
        assert row.acquired_at >= released_at, "the lease was counted from before the lock wait"
        assert row.expires_at > _store_time(store), "b's lease was born expired"
        assert b.tick() and b.epoch == first + 1, "b lost the lease it had just taken"
        assert _lease(store).epoch == first + 1
    finally:
        holder.close()


def test_a_slow_follower_never_locks_a_healthy_leaders_row(store, store_url):
    a = LeaderLease(store, "a", None, TIMEOUTS)
    assert a.tick()
    epoch = a.epoch
    slow = Store(store_url)                         # b's own engine: only its statements are slowed
    statements: list[str] = []

    @event.listens_for(slow.engine, "after_cursor_execute")
    def _slowed(conn, cursor, statement, *args):
        statements.append(statement)
        if "leadership" in statement:               # longer than the ttl after each read of the lease
            time.sleep(TIMEOUTS.lease_ttl + 0.5)

    b = LeaderLease(slow, "b", None, TIMEOUTS)
    done = threading.Event()
    renewals = []

    def lead():                                     # a's loop, renewing as the coordinator does
        while not done.is_set():
            renewals.append(a.renew_if_due())
            time.sleep(0.05)

    leading = threading.Thread(target=lead, daemon=True)
    leading.start()
    try:
        assert not b.tick(), "b took a healthy leader's lease"
    finally:
        done.set()
        leading.join(10)
        slow.dispose()
    assert not [q for q in statements if "FOR UPDATE" in q], "b locked the lease row of a healthy leader"
    assert all(renewals) and a.is_leader and a.epoch == epoch, f"a lost its lease: {list(a.losses)}"
    assert (_lease(store).node_id, _lease(store).epoch) == ("a", epoch)
