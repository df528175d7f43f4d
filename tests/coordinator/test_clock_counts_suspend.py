"""The clock every lease, self-fence and worker fence is timed on counts a host's suspend: a
window timed on CLOCK_MONOTONIC stands still while the host sleeps, and a host resumed after a
minute would believe its 1 s window still open while the leader's clock ran on."""

from __future__ import annotations

import time

import pytest

from seatide import clock


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="the kernel has no CLOCK_BOOTTIME")
def test_the_windows_clock_is_the_one_that_counts_a_suspend():
    before = time.clock_gettime(time.CLOCK_BOOTTIME)
    read = clock.monotonic()
    after = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert before <= read <= after
    # A wall clock skewed for a test keeps the same duration clock.
    previous = clock.use(lambda: time.time() + 30.0, monotonic=clock.real_monotonic)
    try:
        assert before <= clock.monotonic() <= time.clock_gettime(time.CLOCK_BOOTTIME)
    finally:
        clock.use(previous)
    assert clock.monotonic() >= after
