"""The store's clock: the one clock the control plane compares instants by.

Hosts' clocks disagree (a few milliseconds with NTP, minutes without). If each
coordinator compared the lease's expiry with its own clock, one running ahead would take
a lease its holder still believes valid, and a cluster would have two leaders. The same
holds for every other instant the leader compares (a heartbeat, a pipeline's start, its
last checkpoint, a stop request): a driver whose clock runs behind would never be seen
stalled, one running ahead would be flagged at once. So every stamp written to the store
is the store's time, read in the same statement that writes it:

* PostgreSQL: the server's ``clock_timestamp()``, as epoch seconds (the time of the
  statement, not of the transaction's start, which may be a lock wait earlier).
* SQLite: the store is one file on one host, and SQLite runs inside each process on that
  host, so that host's clock is the store's clock: the writer's ``clock.store_now()`` (the
  host's clock, or the simulation's store clock), read once it holds the write lock.
"""

from __future__ import annotations

import logging
import os
import time

from sqlalchemy import Float, cast, func, literal, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from seatide import clock


def store_now(conn: Connection) -> ColumnElement:
    """The store's current time in epoch seconds, as an expression for a statement on
    ``conn``. On SQLite it is read when this is called: call it inside the transaction."""
    if conn.dialect.name == "sqlite":
        return literal(clock.store_now(), Float)
    return cast(func.extract("epoch", func.clock_timestamp()), Float)


def read_store_now(conn: Connection) -> float:
    if conn.dialect.name == "sqlite":
        return clock.store_now()      # this host's clock, without a round trip
    return conn.execute(select(store_now(conn))).scalar()


CLOCK_SKEW_ENV = "SEATIDE_CLOCK_SKEW_S"


def skew_wall_clock_for_tests() -> None:
    """Tests only: run this process as on a host whose clock is off by SEATIDE_CLOCK_SKEW_S
    seconds (every ``clock.now()`` in it; its monotonic clock is untouched)."""
    skew = os.environ.get(CLOCK_SKEW_ENV)
    if not skew:
        return
    offset = float(skew)
    clock.use(lambda: time.time() + offset, monotonic=clock.real_monotonic)
    logging.getLogger(__name__).warning("this process's wall clock is off by %+g s (%s)", offset, CLOCK_SKEW_ENV)
