"""The control plane's one clock: every "now" the coordinator, worker and driver reporter read.

Production reads ``time.time()``. The deterministic simulation (``seatide.testing.simulate``)
swaps the source for a simulated clock, per simulated process, so a lease expiry, a
heartbeat timeout or a skewed host is a step it chooses rather than a wait.
"""

from __future__ import annotations

import time
from typing import Callable



def _since_boot() -> float:
    """CLOCK_BOOTTIME: CLOCK_MONOTONIC plus the time the host spent suspended. A lease or a
    fence window timed on CLOCK_MONOTONIC stands still through a suspend, so a host resumed
    after a minute would believe its 1 s window still open while the leader, whose clock ran
    on, has given its work to another: the window must count the suspend too."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


real_monotonic: Callable[[], float] = _since_boot if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic
_source: Callable[[], float] = time.time
_monotonic: Callable[[], float] = real_monotonic
# The clock of an SQLite store: its host's, which is every process's on that host (None). The
# simulation runs its store on a clock of its own, so that a process whose clock is skewed
# still stamps (and is judged by) the store's time, as on PostgreSQL.
_store_source: Callable[[], float] | None = None


def now() -> float:
    return _source()


def store_now() -> float:
    """An SQLite store's time (``store/clock.py`` reads it): this host's, unless simulated."""
    return (_store_source or _source)()


def use_store_clock(source: Callable[[], float] | None) -> None:
    """Simulation only: the store's clock, apart from every process's (None: the host's)."""
    global _store_source
    _store_source = source


def monotonic() -> float:
    """For durations a process measures itself (how long its lease or its heartbeat is
    still good): never stepped by NTP, and counting a suspend (CLOCK_BOOTTIME where the
    kernel has it). Under a simulated clock, that clock."""
    return _monotonic()


def use(source: Callable[[], float], monotonic: Callable[[], float] | None = None) -> Callable[[], float]:
    """Read time from ``source`` from now on; returns the previous source (to restore it).
    Durations follow ``monotonic``, or ``source`` itself unless it is the real clock."""
    global _source, _monotonic
    previous, _source = _source, source
    _monotonic = monotonic or (real_monotonic if source is time.time else source)
    return previous
