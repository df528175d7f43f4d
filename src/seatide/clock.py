"""The control plane's one clock: every "now" the coordinator, worker and driver reporter read.

Production reads ``time.time()``. The deterministic simulation (``seatide.testing.simulate``)
swaps the source for a simulated clock, per simulated process, so a lease expiry, a
heartbeat timeout or a skewed host is a step it chooses rather than a wait.
"""

from __future__ import annotations

import time
from typing import Callable

_source: Callable[[], float] = time.time


def now() -> float:
    return _source()


def use(source: Callable[[], float]) -> Callable[[], float]:
    """Read time from ``source`` from now on; returns the previous source (to restore it)."""
    global _source
    previous, _source = _source, source
    return previous
