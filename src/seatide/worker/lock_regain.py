"""A worker's liveness lock lost while it lives: whether its drivers may live on.

PostgreSQL ends the lock's session of a live worker in a restart of the store's server (or a
failover), in ``pg_terminate_backend``, or when the connection breaks. The leader takes a lock
that stayed free, with no heartbeat from the worker, as the worker's death and starts its jobs
elsewhere (``coordinator/service.py``): a worker that cannot rule that out kills its drivers
first (fail-stop), or a job would run twice.

A restart is the one loss the worker can rule it out for. Every lock is free after it, so the
leader believes no free lock until the server has been up for ``Timeouts.lock_restart_grace``
(``store/liveness.py``), and then only one that stays free for ``lock_death_confirm_after``.
A worker that holds its lock again and has heartbeated within ``worker_keeps_drivers_within``
of the server's start is therefore never taken for dead over it, and its drivers, which took
their own steps again on new sessions (``store/sessions.py``), go on: the job checkpoints
again as soon as the server is back, with the same driver.

The worker proves both from the server itself, after its heartbeat: the server's uptime is
shorter than the time since the worker last found the lock held (the server started after
the lock was lost), and no longer than that bound (the heartbeat landed within it). Anything
else (a terminated session on a server that did not restart, a late return) kills the drivers,
as before. Until it is back, the worker has until ``kill_by``: a lock lost on a server that
keeps serving may be seen free at once, so the drivers die by ``lock_death_confirm_after``
less the margin from the last time the lock was seen held; but a server that refuses
connections, or says it is starting up or shutting down, serves no leader either, and each
such answer moves that moment to a grace and a confirmation after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from seatide import clock
from seatide.store.sessions import server_not_serving
from seatide.timeouts import FENCE_MARGIN_S, Timeouts


@dataclass
class LockRegain:
    """What a worker knows of its liveness lock between checks (monotonic times)."""

    timeouts: Timeouts
    held_at: float = 0.0           # just before the last check that found the lock held
    lost: bool = False             # found gone, drivers kept while it may be taken back in time
    down_seen_at: float | None = None   # just before the last try the server did not serve
    up_for: float | None = None    # the server's uptime when the lock was last shown back in time

    def __post_init__(self):
        self.held_at = clock.monotonic()

    def seen_held(self, asked: float) -> None:
        self.held_at = asked

    def seen_lost(self) -> None:
        self.lost, self.down_seen_at = True, None

    def tried(self, exc: BaseException, sent: float) -> None:
        """A try to take the lock back, sent at ``sent``, failed with ``exc``."""
        if server_not_serving(exc):
            self.down_seen_at = sent

    def kill_by(self) -> float:
        """The moment the drivers must be dead by, unless the lock is shown back in time first."""
        t = self.timeouts
        latest = self.held_at + t.lock_death_confirm_after
        if self.down_seen_at is not None:      # that server's start is later still
            latest = max(latest, self.down_seen_at + t.lock_restart_grace + t.lock_death_confirm_after)
        return latest - FENCE_MARGIN_S

    def keeps_drivers(self, asked: float, up_for: float | None) -> bool:
        """Held again and heartbeated, then the server's uptime ``up_for`` read (``asked``: just
        before that read): whether the server started after the lock was last seen held, and
        the heartbeat landed within ``worker_keeps_drivers_within`` of that start."""
        return (up_for is not None and up_for < asked - self.held_at
                and up_for <= self.timeouts.worker_keeps_drivers_within)
