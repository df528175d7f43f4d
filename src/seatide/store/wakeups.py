"""Wake-ups: the leader tells a worker at once that it was given an attempt.

A worker polls the store for its attempts every ``poll`` seconds (0.25 by default): on
average an eighth of a second, at most a quarter, between the leader's assignment and the
worker's claim, on the path of every job's start and every recovery. On PostgreSQL the
leader's assigning transaction also sends ``NOTIFY`` (delivered when it commits), and each
worker listens on a connection of its own and polls at once when its name arrives.

An accelerator only, like the liveness locks: nothing is decided from a notification, and a
lost one (a listener reconnecting, a worker started late) costs at most one poll. SQLite
stores keep polling.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from sqlalchemy import text

log = logging.getLogger(__name__)

CHANNEL = "seatide_attempt_assigned"
RECONNECT_AFTER_S = 2.0


def announce_assignment(conn, worker_id: str) -> None:
    """In the assigning transaction: wake ``worker_id`` once it commits (PostgreSQL only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, :worker)"), {"channel": CHANNEL, "worker": worker_id})


class AssignmentListener:
    """Calls ``on_assigned`` whenever the leader announces an attempt for ``worker_id``."""

    def __init__(self, url: str, worker_id: str, on_assigned: Callable[[], None]):
        self.url = "postgresql://" + url.split("://", 1)[1]
        self.worker_id = worker_id
        self.on_assigned = on_assigned
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="assignment-listener", daemon=True)

    def start(self) -> "AssignmentListener":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        paused = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if paused:
                        log.info("assignment wake-ups resumed")
                        paused = False
                    self.on_assigned()     # whatever was announced while nobody listened
                    while not self._stop.is_set():
                        # Returns after a second without one: the stop flag is looked at.
                        for note in conn.notifies(timeout=1.0):
                            if note.payload == self.worker_id:
                                self.on_assigned()
            except Exception as exc:   # the poll still finds every attempt: say so once, retry later
                if not paused:
                    log.warning("assignment wake-ups paused (%s); the worker polls until they resume", exc)
                    paused = True
                self._stop.wait(RECONNECT_AFTER_S)
