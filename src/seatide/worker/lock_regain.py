"""A worker's liveness lock, as the worker knows it between checks: whether its drivers may live.

PostgreSQL ends the lock's session of a live worker in a restart of the store's server (or a
failover), in ``pg_terminate_backend``, or when the connection breaks. The leader takes a lock
that stayed free for ``Timeouts.lock_death_confirm_after``, with no heartbeat from the worker
since it first saw it free, as the worker's death, and starts its jobs elsewhere
(``coordinator/service.py``). The leader's first sighting of the free lock comes after the last
moment the worker saw it held (it was still the worker's then). So the drivers may live until
that moment plus the window less the margin (``kill_by``), and no longer unless the worker
shows again, in time, that the lock is its own:

- a check finds it held: the window starts again from when that check was asked (the lock was
  the worker's at some moment after that, so the leader's first free sighting comes later);
- a check finds it gone (``AWAY``): the worker tries to take it back and heartbeat. The heartbeat
  lands after any sighting of the free lock (the lock was free only before it was taken back),
  so it cancels any verdict, and the lock held again ends the free streak: the drivers live on,
  with their steps taken again on new sessions (``store/sessions.py``). This is the usual end
  of a quick restart of the server;
- the window ends with neither (a check unanswered on a connection a failover black-holed, one
  answered too late, a worker starved of the CPU, a lock not back in time): the drivers die
  (``FENCED``), from a thread of their own however long a check or a try blocks. Nothing is
  launched then until the lock is taken again, the worker has registered afresh and a check has
  shown it held.

The margin (``FENCE_MARGIN_S``) is what separates their death from the leader's earliest
verdict. Nothing here needs to know why the lock was lost: the rule a heartbeat cancels a
verdict by is the leader's own (the earliest coordinators with liveness locks took a free lock
as a death at first sight; older coordinators must be stopped before an upgrade:
docs/operations.md, Upgrading). A lock that cannot be lost while its holder lives (``flock``:
SQLite) is not watched: no window, no fence.

One place for the states. Every move, and every change to the worker's drivers that a fence
must see, is made under ``mutex``, which is never held across I/O: a fork, a hand-off to a warm
driver or a store round trip never delays the fence (``worker/presence.py``, ``launch.py``).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

from seatide import clock
from seatide.timeouts import FENCE_MARGIN_S, LIVENESS_CHECK_S, Timeouts


class LockState(enum.Enum):
    HELD = "held"        # shown held within the window: drivers run and are launched
    AWAY = "away"        # found gone: the drivers live while it may still come back in time; no launch
    FENCED = "fenced"    # the drivers were killed: no launch until it is taken again and registered


@dataclass
class LockRegain:
    """The worker's liveness lock between checks (monotonic times)."""

    timeouts: Timeouts
    watched: bool = True           # False: a lock its holder cannot lose (or none): never fenced
    held_at: float = field(default_factory=clock.monotonic)   # just before the last check that found it held
    state: LockState = LockState.HELD
    fences: int = 0                # how many times the drivers were killed: a launch begun before one is too
    fenced_at: float | None = None  # when they last were
    mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def kill_by(self) -> float:
        """The moment the drivers must be dead by unless the lock is shown held again.
        From this worker's timeouts: every process of a cluster must be given the same ones
        (``timeouts.py``); a leader with a shorter heartbeat interval has a shorter window."""
        return self.held_at + self.timeouts.lock_death_confirm_after - FENCE_MARGIN_S

    def check_every(self) -> float:
        """How often the lock is checked while held: four checks to a window, so one that comes
        late (a loaded machine) leaves the next three to show it held in time."""
        return min(LIVENESS_CHECK_S, (self.timeouts.lock_death_confirm_after - FENCE_MARGIN_S) / 4)

    def may_launch(self, now: float) -> bool:
        return self.state is LockState.HELD and (not self.watched or now < self.kill_by())

    def seen_held(self, asked: float) -> bool:
        """A check asked at ``asked`` found the lock held: False if the drivers were fenced
        meanwhile (the worker registers afresh before it launches again)."""
        if self.state is LockState.FENCED:
            return False
        self.held_at, self.state = max(self.held_at, asked), LockState.HELD
        return True

    def seen_gone(self) -> None:
        if self.state is LockState.HELD:
            self.state = LockState.AWAY

    def must_fence(self, now: float) -> bool:
        """The window ended with the lock not shown held since: a lock that cannot be shown
        held may be free to the leader, answered or not."""
        return self.watched and self.state is not LockState.FENCED and now >= self.kill_by()

    def fenced(self, at: float) -> None:
        self.state, self.fences, self.fenced_at = LockState.FENCED, self.fences + 1, at

    def taken_again(self, asked: float) -> None:
        """Held again after a fence, registered afresh, and shown held by a check asked at
        ``asked``: the worker may launch."""
        self.held_at, self.state = asked, LockState.HELD
