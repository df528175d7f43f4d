"""Assignment wake-ups on a real PostgreSQL: a worker hears of its attempt when the leader's
transaction commits, not before, not after a rollback, and not of another worker's. (The
cluster tests on PostgreSQL run every job start through it; bench/failover.py measures it.)"""

from __future__ import annotations

import threading
import time

from sqlalchemy import text

from seatide.store.db import open_store
from seatide.store.wakeups import AssignmentListener, announce_assignment
from tests.stores import postgresql_only


def _listening(events: dict) -> None:
    """Wait until each listener has connected (it wakes once when it starts listening)."""
    for name, event in events.items():
        assert event.wait(20), f"{name} never started listening"
        event.clear()


@postgresql_only
def test_a_worker_hears_of_its_own_assignment_once_the_transaction_commits(store_url):
    store = open_store(store_url)
    woken = {"w1": threading.Event(), "w2": threading.Event()}
    listeners = {name: AssignmentListener(store_url, name, event.set).start() for name, event in woken.items()}
    try:
        _listening(woken)
        with store.write() as conn:
            announce_assignment(conn, "w1")
            conn.execute(text("SELECT pg_sleep(0.3)"))
            assert not woken["w1"].is_set(), "woken before the assignment committed"
        began = time.monotonic()
        assert woken["w1"].wait(5), "w1 was not woken by its assignment"
        assert time.monotonic() - began < 1.0
        assert not woken["w2"].wait(0.5), "w2 was woken by w1's assignment"
        with store.write() as conn:       # rolled back: nobody hears of it
            announce_assignment(conn, "w2")
            conn.rollback()
        assert not woken["w2"].wait(0.5)
    finally:
        for listener in listeners.values():
            listener.stop()
        store.dispose()


def test_a_sqlite_store_announces_nothing(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    try:
        with store.write() as conn:
            announce_assignment(conn, "w1")     # no NOTIFY in SQLite: polling only, and no error
    finally:
        store.dispose()


def test_an_unreachable_store_pauses_wake_ups_with_one_warning_and_stops_cleanly(caplog, monkeypatch):
    """Nothing listens on port 1: the listener says so once however often it retries, and
    stops when told."""
    import psycopg

    from seatide.store import wakeups

    tries = []
    real_connect = psycopg.connect

    def counted(*args, **kwargs):     # the real connect, counted
        tries.append(1)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    monkeypatch.setattr(wakeups, "RECONNECT_AFTER_S", 0.01)
    caplog.set_level("WARNING", logger="seatide.store.wakeups")
    listener = AssignmentListener("postgresql://postgres@127.0.0.1:1/test", "w1", lambda: None).start()
    deadline = time.monotonic() + 20
    while len(tries) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    listener.stop()
    assert len(tries) >= 5 and not listener._thread.is_alive()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "the worker polls until they resume" in warnings[0], warnings
