"""The lease row's lock on PostgreSQL. A follower's election never waits for the row, never locks a row
that is not the expired one it judged, and the lease it takes runs a full ttl from the take; a leader
that wakes after another took over locks nothing.

A leader paused (SIGSTOP) inside a transaction on the lease row held a follower's election waiting up
to the store's idle limit. Stop 58's failure of
``tests/cluster/test_leader.py::test_paused_leader_changes_nothing_after_it_wakes[postgresql]``: the
follower's lease was stamped with the store time PostgreSQL read before that wait, so it was born
expired, refused at the first renewal, and taken again under a new epoch. And a follower slowed in
its election must never lock a healthy leader's row (two outside reviews of the fix: a stale expiry
read, or another follower's election between the read and the lock, let it hold up the renewal).
The same holds for a woken leader's write (a third review): its ``leader_tx`` locked the new
leader's row before it found its epoch gone.

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
from seatide.store.db import NotLeader, Store, open_store
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


def _expired_leader(store) -> LeaderLease:
    """Leader "a", elected, whose lease is then over by the store's clock (as if it had been paused)."""
    a = LeaderLease(store, "a", None, TIMEOUTS)
    assert a.tick() and a.is_leader
    with store.write() as conn:
        conn.execute(update(s.leadership).where(s.leadership.c.id == 1).values(expires_at=0.0))
    return a


def _follower_ticks(slow: Store, leader: LeaderLease) -> tuple[bool, list[bool]]:
    """Follower b ticks once on its own (slowed) store while the leader's holder loop renews in a
    thread, as the coordinator's does: whether b took the lease, and each renewal's answer."""
    b = LeaderLease(slow, "b", None, TIMEOUTS)
    done, renewals = threading.Event(), []

    def lead():
        while not done.is_set():
            if leader.epoch is not None:
                renewals.append(leader.renew_if_due())
            time.sleep(0.05)

    leading = threading.Thread(target=lead, daemon=True)
    leading.start()
    try:
        return b.tick(), renewals
    finally:
        done.set()
        leading.join(10)
        slow.dispose()


def test_a_follower_never_waits_for_a_held_row_and_its_lease_runs_a_ttl_from_the_take(store):
    holder = store.engine.connect()
    try:
        _expired_leader(store)
        first = _lease(store).epoch

        # a paused holder's open transaction on the row, which the server does not end on its own here
        tx = holder.begin()
        holder.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        holder.execute(select(s.leadership).where(s.leadership.c.id == 1).with_for_update()).one()
        b = LeaderLease(store, "b", None, TIMEOUTS)
        elected: list[bool] = []
        ticking = threading.Thread(target=lambda: elected.append(b.tick()), daemon=True)
        ticking.start()
        waited = []
        wait_for(lambda: not ticking.is_alive() or waited.append(_waiting_on_a_lock(store)) or waited[-1], 30,
                 message="b's tick neither ended nor waited")
        assert not any(waited), "b's election waited for a row another transaction holds"
        ticking.join(30)
        assert elected == [False] and (_lease(store).epoch, b.epoch) == (first, None)

        released_at = _store_time(store)
        tx.rollback()
        assert b.tick(), "b did not take the expired lease once the row was free"
        assert b.is_leader, "b's own clock counted its lease from before it took it"
        row = _lease(store)
        assert (row.node_id, row.epoch) == ("b", first + 1)
        assert row.acquired_at >= released_at, "the lease was counted from before the take"
        assert row.expires_at > _store_time(store), "b's lease was born expired"
        assert b.tick() and b.epoch == first + 1, "b lost the lease it had just taken"
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

    took, renewals = _follower_ticks(slow, leader=a)
    assert not took, "b took a healthy leader's lease"
    assert not [q for q in statements if "FOR UPDATE" in q], "b locked the lease row of a healthy leader"
    assert all(renewals) and a.is_leader and a.epoch == epoch, f"a lost its lease: {list(a.losses)}"
    assert (_lease(store).node_id, _lease(store).epoch) == ("a", epoch)


def test_a_follower_never_locks_the_lease_another_took_since_it_read_it(store, store_url):
    """b reads the expired lease; before b locks it, c is elected; b then stalls past c's ttl."""
    a = _expired_leader(store)
    c = LeaderLease(store, "c", None, TIMEOUTS)
    slow = Store(store_url)

    @event.listens_for(slow.engine, "after_cursor_execute")
    def _between(conn, cursor, statement, *args):
        if "leadership" not in statement:
            return
        if c.epoch is None:                         # right after b's first read: c is elected
            assert c.tick()
        elif "FOR UPDATE" in statement:             # b stalls while holding whatever it locked
            time.sleep(TIMEOUTS.lease_ttl + 0.5)

    took, renewals = _follower_ticks(slow, leader=c)
    assert not took, "b took the lease c had just been elected to"
    epoch = c.epoch
    assert c.is_leader and all(renewals), f"c lost its lease: {list(c.losses)}"
    assert (_lease(store).node_id, _lease(store).epoch) == ("c", epoch)


def test_a_leader_that_woke_after_a_takeover_locks_nothing(store, store_url):
    """a was paused; b took over; a wakes and begins a leader write under its old epoch."""
    a = _expired_leader(store)
    b = LeaderLease(store, "b", None, TIMEOUTS)
    assert b.tick()
    woken = Store(store_url)
    probes: list[bool] = []

    @event.listens_for(woken.engine, "after_cursor_execute")
    def _probe(conn, cursor, statement, *args):      # is b's row locked while a's transaction is open?
        if "FOR UPDATE" in statement:
            probes.append(_row_free(store))

    try:
        with pytest.raises(NotLeader):
            with woken.leader_tx(a.epoch):
                pass
    finally:
        woken.dispose()
    assert probes == [True], "a's write locked the row of the leader that took over"
    assert b.tick() and _lease(store).node_id == "b"


def _row_free(store) -> bool:
    with store.write() as conn:
        return conn.execute(select(s.leadership.c.id).where(s.leadership.c.id == 1)
                            .with_for_update(skip_locked=True)).first() is not None
