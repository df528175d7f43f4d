"""The control plane's one clock: every "now" the coordinator, worker and driver reporter read.

Production reads ``time.time()``. The deterministic simulation (``seatide.testing.simulate``)
swaps the source for a simulated clock, per simulated process, so a lease expiry, a
heartbeat timeout or a skewed host is a step it chooses rather than a wait.
"""

from __future__ import annotations

import time
from typing import Callable

_source: Callable[[], float] = time.time
_monotonic: Callable[[], float] = time.monotonic


def now() -> float:
    return _source()


def monotonic() -> float:
    """For durations a process measures itself (how long its lease or its heartbeat is
    still good): never stepped by NTP. Under a simulated clock, that clock."""
    return _monotonic()


def use(source: Callable[[], float], monotonic: Callable[[], float] | None = None) -> Callable[[], float]:
    """Read time from ``source`` from now on; returns the previous source (to restore it).
    Durations follow ``monotonic``, or ``source`` itself unless it is the real clock."""
    global _source, _monotonic
    previous, _source = _source, source
    _monotonic = monotonic or (time.monotonic if source is time.time else source)
    return previous
