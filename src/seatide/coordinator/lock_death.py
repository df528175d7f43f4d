"""The leader's verdict on a worker by its liveness lock: dead once the lock has stayed free for
``Timeouts.lock_death_confirm_after`` and the worker has not heartbeated since.

A free lock alone is no death certificate: a restart of PostgreSQL (or a failover, or
``pg_terminate_backend``) frees the lock of a live worker. Such a worker sees its lock gone
within ``LIVENESS_CHECK_S``; it takes it back with a heartbeat, or kills its drivers, within the
window less a margin after it last saw the lock held (worker/lock_regain.py). docs/operations.md
says why; ``reconcile.died_with_worker`` judges each driver by the same first sighting.

The free streak is counted on two clocks, and the verdict needs both to show the window:
- the store's (``free_among``'s time, read after the probe): the worker's heartbeats are
  stamped on it, so "not since" compares there, and a pass whose ``now`` was read before its
  probe never counts free time from before the lock was seen free;
- this process's own monotonic clock, read after the probe: the worker times its window on
  its monotonic clock, so the streak must have lasted that long in real time too. A step
  forward of the store host's wall clock (an NTP correction) would otherwise end the streak
  early while the worker's drivers still live (stop 62 review round 4, L3).

Observations, not facts: a new leader (or this one after a store gap) starts them afresh,
which only makes it wait longer before it replaces anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from seatide import clock
from seatide.coordinator.reconcile import seen_silent
from seatide.store.liveness import worker_lock

log = logging.getLogger("seatide.coordinator.service")


@dataclass(frozen=True)
class FirstFree:
    store_at: float      # the store's time the lock was first seen free (heartbeats compare to it)
    local_at: float      # this process's monotonic clock then


class LockDeathWatch:
    def __init__(self, confirm_after: float):
        self.confirm_after = confirm_after
        self.first_free: dict[str, FirstFree] = {}    # lock name -> when first seen free
        self._logged: set[str] = set()                # dead workers already logged (log once)

    def forget(self) -> None:
        """The store was out of reach, or this coordinator did not lead (nor probe) for a while: a
        lock seen free before counts from after."""
        self.first_free = {}

    def dead_among(self, liveness, workers: dict, now: float, observed: float, seen_from: dict | None,
                   lost_after: float) -> dict[str, float]:
        """Workers dead by their liveness lock, each with the store time it was first seen free.

        Read after the node rows, so a worker registered in them had taken its lock before
        (it takes the lock, then registers). Only workers not yet lost by heartbeat are asked,
        by the silence this leader has seen (``reconcile.age``): one that died before it began
        watching (a resume of a run killed long ago) is read too, not left for a whole window."""
        watched = {worker_lock(n.node_id): n for n in workers.values() if n.liveness and not n.stopped
                   and seen_silent(now, n.heartbeat_at, observed, seen_from) <= lost_after}
        if not watched:
            self.forget()
            return {}
        try:
            free, seen_at = liveness.free_among(watched)     # read after the pass's now
        except Exception as exc:    # an accelerator only: the heartbeats still judge them
            log.warning("cannot read the workers' liveness locks: %s", exc)
            self.forget()      # unwatched meanwhile
            return {}
        return self.judge(watched, free, seen_at, now)

    def judge(self, watched: dict, free: set[str], seen_at: float, now: float) -> dict[str, float]:
        """``watched``: lock name -> node row; ``free``: the names a probe found free, its store
        time ``seen_at``, read after the pass's store time ``now``. The dead workers, each with
        the store time its lock was first seen free."""
        seen = max(now, seen_at)        # the streak's start and its length, both by the probes' own times
        local = clock.monotonic()       # after the probe returned: never before the lock was seen free
        self.first_free = {name: self.first_free.get(name, FirstFree(seen, local)) for name in free}
        dead = {}
        for name, first in self.first_free.items():
            node = watched[name]
            lasted = min(seen - first.store_at, local - first.local_at)
            if lasted >= self.confirm_after and node.heartbeat_at < first.store_at:
                dead[node.node_id] = first.store_at
        for name, first in self.first_free.items():
            node_id = watched[name].node_id
            if node_id in dead and node_id not in self._logged:
                log.warning("worker %s died: its liveness lock has been free for %.1f s and it has not heartbeated "
                            "since", node_id, min(seen - first.store_at, local - first.local_at))
        self._logged = set(dead)
        return dead


__all__ = ["FirstFree", "LockDeathWatch"]
