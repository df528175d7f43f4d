"""How long the leader itself has seen a heartbeat stamp unchanged, on its own monotonic clock.

Every instant the leader compares is the store's (DESIGN §5), so a step forward of the store
host's wall clock would make every silence look longer at once: a worker or driver still
inside its window would be judged lost or gone, and its work started again beside it (outside
review of stop 63, H1). A silence must therefore have lasted on this process's monotonic clock
too: the leader notes when it first saw each stamp it judges a silence by (heartbeats, launches,
checkpoints, progress, a cancel's request) and counts a silence as no longer than it has seen
that value stand.

Stamps are keyed by value, not by row: two rows that carry the same value share its first
sighting, which is safe because a value is first seen only after the store's clock had
passed it, whichever row was read. It can only make the leader wait longer: a value is first seen after it was written, and a
new leader (or this one after a store gap, or a term another coordinator led) starts afresh,
as ``Snapshot.observed_since`` does for the store's clock.
"""

from __future__ import annotations

from typing import Iterable

from seatide import clock


class StampWatch:
    def __init__(self):
        self._first_seen: dict[float, float] = {}     # stamp -> this process's monotonic time first seen

    def forget(self) -> None:
        self._first_seen = {}

    def seen_from(self, stamps: Iterable[float | None], now: float, local_now: float) -> dict[float, float]:
        """For each stamp of this pass (just read), the store time from which the leader has seen
        it stand: ``now`` less how long it has seen it on its own clock. ``local_now``: this
        process's monotonic clock read just before ``now`` was; a stamp's first sighting is
        the monotonic time after it was read. Both err on the short side. Stamps not in this
        pass are dropped (a heartbeat that moved on never comes back)."""
        read = clock.monotonic()
        self._first_seen = {stamp: self._first_seen.get(stamp, read) for stamp in stamps if stamp is not None}
        return {stamp: now - (local_now - first) for stamp, first in self._first_seen.items()}

__all__ = ["StampWatch"]
