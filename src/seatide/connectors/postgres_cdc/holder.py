"""Who holds a replication slot SeaTide cannot use now, and how long a driver waits for it.

A slot serves one connection at a time: ``START_REPLICATION`` on a slot another connection
streams fails with 55006 ("replication slot ... is active for PID n"), and so do dropping,
peeking and advancing it (``slot``). The holder is either

* this job's own (its ``application_name`` is the job's, see ``application_name``): the stream
  of the last batch letting go, or the walsender of an earlier driver that died, which the
  server ends once it notices the connection is gone (``wal_sender_timeout`` at the latest). It
  goes by itself: waited for; past the bound the attempt ends with an error a retry may not meet.
* anyone else (``pg_recvlogical``, another job given the same ``slot.name``, a client reading the
  slot by hand): it does not go by itself. Past the bound the attempt fails for good, naming the
  holder and the way out; retrying would only wait the same bound again, every attempt.

The bound is ``slot.active-timeout.ms``. A wait longer than a moment is logged, naming the
holder (pid, application_name, client address, since when), again whenever the holder changes
and every ``_LOG_EVERY_S``, so no start waits without a word.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

# The bound slot.active-timeout.ms defaults to: over PostgreSQL's default wal_sender_timeout
# (60 s), after which the server has ended a dead driver's walsender, with room to spare.
DEFAULT_TIMEOUT_MS = 180_000
_QUIET_S = 1.0          # the last batch's stream letting go takes less: not worth a log line
_LOG_EVERY_S = 10.0
_SEATIDE = "seatide job "
_MAX_NAME = 63          # PostgreSQL keeps this much of an application_name
_HASH_CHARS = 12

# pg_stat_activity shows another role's application_name and client only to superusers and
# pg_read_all_stats members: the PID (pg_replication_slots) is always there.
_QUERY = ("SELECT s.active_pid, a.application_name, "
          "CASE WHEN a.client_addr IS NULL THEN NULL ELSE host(a.client_addr) || ':' || a.client_port END, "
          "to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC', "
          "a.backend_start IS NOT NULL AND a.client_addr IS NULL "
          "FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid "
          "WHERE s.slot_name = {name}")


def application_name(config: dict) -> str:
    """What the source's sessions call themselves: a holder so named is this job's own. The name
    ends in a hash of the whole run key, as the server keeps 63 characters and two run keys may
    share more than that: ``seatide job <its first 38 characters> <12 hex digits>``."""
    key = str(config.get("job_id") or "local")
    digest = hashlib.sha1(key.encode()).hexdigest()[:_HASH_CHARS]
    return f"{_SEATIDE}{key[:_MAX_NAME - len(_SEATIDE) - 1 - _HASH_CHARS]} {digest}"


def timeout_s(config: dict) -> float:
    return max(1, int(config.get("active_timeout_ms") or DEFAULT_TIMEOUT_MS)) / 1000


@dataclass(frozen=True)
class Holder:
    pid: int
    application_name: str | None
    client: str | None
    since: str | None
    local: bool = False         # connected through the server's Unix socket

    def describe(self) -> str:
        known = [f"application_name '{self.application_name}'" if self.application_name is not None else None,
                 f"client {self.client}" if self.client else ("a local socket client" if self.local else None),
                 f"connected since {self.since}" if self.since else None]
        said = ", ".join(k for k in known if k) or ("no more is shown to this user: grant it pg_read_all_stats "
                                                    "to see the holder's application and address")
        return f"PID {self.pid} ({said})"


def find(pgconn, slot_name: str) -> Holder | None:
    """The slot's holder, asked on a replication connection (simple queries only); None: free now."""
    from psycopg import pq

    literal = "'" + slot_name.replace("'", "''") + "'"
    result = pgconn.exec_(_QUERY.format(name=literal).encode())
    if result.status != pq.ExecStatus.TUPLES_OK or result.ntuples == 0:
        return None
    return _holder([None if result.get_value(0, i) is None else result.get_value(0, i).decode() for i in range(5)])


def find_sql(conn, slot_name: str) -> Holder | None:
    """The slot's holder, asked on an ordinary (autocommit) connection; None: free now."""
    row = conn.execute(_QUERY.format(name="%s"), (slot_name,)).fetchone()
    return _holder(row) if row is not None else None


def _holder(row) -> Holder | None:
    if row[0] is None:
        return None
    return Holder(int(row[0]), row[1], row[2], row[3], row[4] in (True, "t"))


class Wait:
    """One wait for a held slot: logs it, and ends it past the bound (``held``)."""

    def __init__(self, slot_name: str, own_name: str | None, bound_s: float, bound: str = "slot.active-timeout.ms"):
        self.slot_name, self.own_name, self.bound_s, self.bound = slot_name, own_name, bound_s, bound
        self.began = time.monotonic()
        self.logged_at: float | None = None
        self.logged: Holder | None = None

    @classmethod
    def of(cls, config: dict, slot_name: str) -> "Wait":
        """A driver's wait, bounded by the source's slot.active-timeout.ms."""
        return cls(slot_name, application_name(config), timeout_s(config))

    def left(self) -> float:
        """Seconds to the bound (a little at least: the try that finds it past is still to come)."""
        return max(0.01, self.bound_s - (time.monotonic() - self.began))

    def own(self, holder: Holder) -> bool:
        return self.own_name is not None and holder.application_name == self.own_name

    def held(self, holder: Holder | None) -> tuple[str, bool] | None:
        """The start was refused while ``holder`` held the slot (None: it let go meanwhile): None
        to try again, or past the bound the error that ends the attempt, and whether it lasts."""
        waited = time.monotonic() - self.began
        if holder is not None and waited >= self.bound_s:
            return self._error(holder, waited), not self.own(holder)
        if waited >= 2 * self.bound_s:      # busy at each try, free at each look: no endless loop either
            return (f"Postgres-CDC: replication slot '{self.slot_name}' was busy at every try for {waited:.0f} s "
                    f"({self.bound}), held each time only briefly: see pg_stat_activity for clients that use "
                    "it"), False
        if holder is None or waited < _QUIET_S:
            return None
        if holder != self.logged or time.monotonic() - (self.logged_at or 0) >= _LOG_EVERY_S:
            log.warning("replication slot '%s' is held by %s, %s; waited %.0f s of %.0f s (%s)", self.slot_name,
                        holder.describe(), self._who(holder), waited, self.bound_s, self.bound)
            self.logged, self.logged_at = holder, time.monotonic()
        return None

    def _who(self, holder: Holder) -> str:
        if self.own(holder):
            return "an earlier driver of this job, whose walsender the server ends once it notices the driver gone"
        if (holder.application_name or "").startswith(_SEATIDE):
            return "another SeaTide job, given the same slot.name"
        return "a connection that is not this job's" if self.own_name is not None else "another connection"

    def _error(self, holder: Holder, waited: float) -> str:
        held = (f"Postgres-CDC: replication slot '{self.slot_name}' is still held after "
                f"{waited:.0f} s ({self.bound}) by {holder.describe()}: {self._who(holder)}.")
        if self.own(holder):
            # It goes by itself: a new attempt (job.retry.times) most likely finds it gone.
            return f"{held} If it stays, end it: SELECT pg_terminate_backend({holder.pid})"
        return (f"{held} A slot serves one connection at a time, and this one does not let go by itself. End it "
                f"if it should not read the slot (SELECT pg_terminate_backend({holder.pid})), or give this "
                "source another slot.name; then resume the job")


__all__ = ["DEFAULT_TIMEOUT_MS", "Holder", "Wait", "application_name", "find", "find_sql", "timeout_s"]
