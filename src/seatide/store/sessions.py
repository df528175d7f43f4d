"""Store sessions the server ends, and taking a step again on a new one.

PostgreSQL ends the session of a process that is alive and well: its idle-in-transaction
limit (``store/db.py``: a process paused inside a transaction for 5 s by SIGSTOP, a frozen
VM, a long collection), a restart or failover of the server, ``pg_terminate_backend``. The
step that was using the session was cut off, not refused: for every process (driver,
leader, worker, API) that is transient. The step is taken again from its start on a new
session (``again_on_new_session``) for as long as the process's fence still holds: the
driver's until its self-fence, the leader's while its lease is good, a worker's and the
API's for a few seconds. A fenced step checks its fence again inside its own transaction,
so a process that was replaced meanwhile is refused as usual (``AttemptFenced``,
``NotLeader``) and changes nothing. A store that does not answer at all for a moment (it is
restarting: connection refused, "the database system is starting up") is the same event
seen a little later, and is taken again the same way, with a short backoff.

Not transient, and raised at once as before: a refused fence, a constraint, a lock wait that
ran out (``lock_timeout``), a cancelled statement, a serialization failure, any error of
SQLite's (a file has no server to end its sessions, nor an idle timer).

A step taken again must be idempotent: when a session ends while its COMMIT is in flight,
whether the first try landed is unknown. Each caller says why its step is (a state it
checks, a key it inserts once, an id it generated before the first try).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from sqlalchemy.exc import DBAPIError

from seatide import clock

log = logging.getLogger(__name__)

T = TypeVar("T")

# SQLSTATEs of a session the server ended, or of a server not taking sessions for a moment:
# idle_in_transaction_session_timeout, admin_shutdown (a fast shutdown, pg_terminate_backend),
# crash_shutdown (another backend crashed), cannot_connect_now (starting up), idle_session_timeout.
# Class 08 (connection exceptions) too.
ENDED_SQLSTATES = frozenset({"25P03", "57P01", "57P02", "57P03", "57P05"})
# The first try again is at once (on a new session), then after these pauses, doubling.
FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 0.5
# A client's request (the API's, an intent's) has no fence: it waits this long for the store
# to give it a session again, then fails as before.
REQUEST_KEEPS_TRYING_S = 5.0


def session_ended(exc: BaseException) -> bool:
    """Whether ``exc`` says the store's server ended the session (or would not start one)."""
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:       # SQLAlchemy saw the connection closed or broken
            return True
        exc = exc.orig
    if not type(exc).__module__.startswith("psycopg"):
        return False                         # SQLite's, or not a database error at all
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return sqlstate in ENDED_SQLSTATES or sqlstate.startswith("08")
    # Without an SQLSTATE psycopg failed on the connection itself: refused, reset, closed.
    import psycopg

    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


def again_on_new_session(step: Callable[[], T], *, what: str, within: float,
                         holds: Callable[[], bool] = lambda: True) -> T:
    """``step()``, taken again while the store ends its session, ``holds()`` is true and
    ``within`` seconds have not passed since the first try; then the last error is raised.
    ``holds`` is the process's own fence (the step's transaction checks the store's). The first
    try again is taken whatever the time: a session the idle limit ended was idle past the limit,
    which for a request is its whole window (``REQUEST_KEEPS_TRYING_S``), so a step starved there
    would otherwise fail of the very event this is for (two store tests under a CPU hog, stop 46);
    a fenced step's transaction still checks its fence."""
    deadline = clock.monotonic() + within
    pause = 0.0
    tries = 1
    while True:
        try:
            return step()
        except Exception as exc:
            if not session_ended(exc) or not holds() or (tries > 1 and clock.monotonic() + pause >= deadline):
                raise
            log.warning("%s: the store ended its session (%s); taken again on a new session (try %d)",
                        what, reason(exc), tries + 1)
        if pause:
            time.sleep(pause)
        pause = next_pause(pause)
        tries += 1


def next_pause(pause: float) -> float:
    """The pause before the next try after ``pause``: none before the first try again."""
    return min(LONGEST_PAUSE_S, max(FIRST_PAUSE_S, 2 * pause))


def reason(exc: BaseException) -> str:
    """The database's one-line reason for ``exc``."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"
