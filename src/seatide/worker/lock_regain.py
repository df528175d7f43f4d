"""A worker's liveness lock lost while it lives: whether its drivers may live on.

PostgreSQL ends the lock's session of a live worker in a restart of the store's server (or a
failover), in ``pg_terminate_backend``, or when the connection breaks. The leader takes a lock
that stayed free for ``Timeouts.lock_death_confirm_after``, with no heartbeat from the worker
since it first saw it free, as the worker's death, and starts its jobs elsewhere
(``coordinator/service.py``). So a worker that lost its lock has until that window less the
margin, counted from the last time it saw the lock held (the lock was still its own then, so
the leader's first sighting comes later), to do one of two things:

- take the lock back and heartbeat: the heartbeat lands after any sighting of the free lock
  (the lock was free only before it was taken back), so it cancels any verdict, and the lock
  held again ends the free streak. The drivers live on; their own steps were taken again on
  new sessions (``store/sessions.py``), so a job checkpoints again as soon as the store is
  back, with the same driver. This is the usual end of a quick restart of the server;
- else kill its drivers (fail-stop), as before, at that moment at the latest: a thread of its
  own does it, however long a try to take the lock back blocks (as before, the kill waits
  for a launch in progress, and a loss is seen only once the check of the lock returns). The
  margin (``FENCE_MARGIN_S``) is what separates their death from the leader's earliest verdict.

Nothing here needs to know why the lock was lost: the rule a heartbeat cancels a verdict by is
the leader's own (the earliest coordinators with liveness locks took a free lock as a death at
first sight; older coordinators must be stopped before an upgrade: docs/operations.md, Upgrading).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seatide import clock
from seatide.timeouts import FENCE_MARGIN_S, Timeouts


@dataclass
class LockRegain:
    """What a worker knows of its liveness lock between checks (monotonic times)."""

    timeouts: Timeouts
    held_at: float = field(default_factory=clock.monotonic)   # just before the last check that found it held
    lost: bool = False             # found gone; the drivers live while it may still come back in time

    def seen_held(self, asked: float) -> None:
        self.held_at = asked

    def kill_by(self) -> float:
        """The moment the drivers must be dead by unless the lock is back and a heartbeat landed.
        From this worker's timeouts: every process of a cluster must be given the same ones
        (``timeouts.py``); a leader with a shorter heartbeat interval has a shorter window."""
        return self.held_at + self.timeouts.lock_death_confirm_after - FENCE_MARGIN_S
