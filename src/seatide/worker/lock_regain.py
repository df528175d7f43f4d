"""A worker's liveness lock, as the worker knows it between checks: whether its drivers may live.

PostgreSQL ends the lock's session of a live worker in a restart of the store's server (or a
failover), in ``pg_terminate_backend``, or when the connection breaks. The leader takes a lock
that stayed free for ``Timeouts.lock_death_confirm_after``, with no heartbeat from the worker
since it first saw it free, as the worker's death, and starts its jobs elsewhere
(``coordinator/service.py``). The leader's first sighting of the free lock comes after the last
moment the worker saw it held (it was still the worker's then). So the drivers may live until
that moment plus the window less the margin (``kill_by``), and no longer unless the worker
shows again, in time, that the lock is its own:

- a check finds it held: the window starts again from when that check was asked;
- a check finds it gone (``AWAY``): the worker tries to take it back and heartbeat. The heartbeat
  lands after any sighting of the free lock (the lock was free only before it was taken back),
  so it cancels any verdict, and the lock held again ends the free streak: the drivers live on,
  with their steps taken again on new sessions (``store/sessions.py``). This is the usual end
  of a quick restart of the server;
- a check asked but not answered by ``kill_by`` (a connection black-holed by a failover, a
  server that stopped answering), or the lock not back in time: the drivers die
  (``FENCED``), from a thread of their own however long a check or a try blocks. Nothing is
  launched then until the lock is taken again and the worker has registered afresh.

The margin (``FENCE_MARGIN_S``) is what separates their death from the leader's earliest
verdict. Nothing here needs to know why the lock was lost: the rule a heartbeat cancels a
verdict by is the leader's own (the earliest coordinators with liveness locks took a free lock
as a death at first sight; older coordinators must be stopped before an upgrade:
docs/operations.md, Upgrading).

One place for the states; the worker makes each move under its launch mutex, so a launch sees
either a lock it may launch under or none (``worker/presence.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from seatide import clock
from seatide.timeouts import FENCE_MARGIN_S, Timeouts


class LockState(enum.Enum):
    HELD = "held"        # seen held at ``held_at``: drivers run and are launched
    AWAY = "away"        # found gone: the drivers live while it may still come back in time; no launch
    FENCED = "fenced"    # the drivers were killed: no launch until it is taken again and registered


@dataclass
class LockRegain:
    """The worker's liveness lock between checks (monotonic times)."""

    timeouts: Timeouts
    held_at: float = field(default_factory=clock.monotonic)   # just before the last check that found it held
    state: LockState = LockState.HELD
    asked_at: float | None = None      # a check asked and not yet answered (HELD only)

    def kill_by(self) -> float:
        """The moment the drivers must be dead by unless the lock is shown held again.
        From this worker's timeouts: every process of a cluster must be given the same ones
        (``timeouts.py``); a leader with a shorter heartbeat interval has a shorter window."""
        return self.held_at + self.timeouts.lock_death_confirm_after - FENCE_MARGIN_S

    @property
    def may_launch(self) -> bool:
        return self.state is LockState.HELD

    def asking(self, at: float) -> None:
        if self.state is LockState.HELD:
            self.asked_at = at

    def seen_held(self, asked: float) -> bool:
        """A check asked at ``asked`` found the lock held: False if the drivers were fenced
        meanwhile (the worker registers afresh before it launches again)."""
        self.asked_at = None
        if self.state is LockState.FENCED:
            return False
        self.held_at, self.state = asked, LockState.HELD
        return True

    def seen_gone(self) -> None:
        self.asked_at = None
        if self.state is LockState.HELD:
            self.state = LockState.AWAY

    def must_fence(self, now: float) -> bool:
        """The drivers must die now: their window ended with the lock away, or with a check
        still unanswered (a lock that cannot be shown held may be free to the leader)."""
        waiting = self.state is LockState.AWAY or (self.state is LockState.HELD and self.asked_at is not None)
        return waiting and now >= self.kill_by()

    def fenced(self) -> None:
        self.state, self.asked_at = LockState.FENCED, None

    def taken_again(self, asked: float) -> None:
        """Held again after a fence, and the worker registered afresh: it may launch."""
        self.held_at, self.state, self.asked_at = asked, LockState.HELD, None
