"""When a worker's pool starts the replacement of a warm driver that took an attempt: once
the attempt has committed its first batch (the driver's STARTED byte on its signal pipe),
or the driver is gone, or ``--warm-refill-hold`` has passed; never beside the attempt's
start-up merely because a few seconds went by (a loaded host's first checkpoint took 72 s,
and a JVM started after a fixed 20 s took half the host from it).

A real ``WarmPool`` with real processes and pipes, on the control plane's clock moved by the
test. Each pool driver is a small process speaking the warm driver's protocol
(``runtime/warm_driver.py``: READY, then TAKEN once given its attempt, STARTED when the test
lets its "first batch" commit): the subject is the pool's decision, not Spark's start."""

from __future__ import annotations

import contextlib
import os
import sys
import time

import pytest

from seatide import clock
from seatide.testing.cluster import wait_for
from seatide.worker.driver_log import DriverLog
from seatide.worker.warm_pool import WarmPool

DRIVER = r"""
import os, sys, time
from seatide.runtime.warm_driver import READY, STARTED, TAKEN
fd = int(sys.argv[sys.argv.index("--ready-fd") + 1])
commit = sys.argv[sys.argv.index("--commit-when") + 1]
os.write(fd, READY)
if not sys.stdin.readline():
    sys.exit(0)                  # the pool closed our stdin: no attempt
os.write(fd, TAKEN)
while not os.path.exists(commit):
    time.sleep(0.05)
os.write(fd, STARTED)
time.sleep(3600)                 # the attempt runs on; its worker kills it
"""


@pytest.fixture
def moved_clock():
    """The control plane's clock, ``offset[0]`` seconds ahead of the host's."""
    offset = [0.0]
    previous = clock.use(lambda: time.time() + offset[0])
    try:
        yield offset
    finally:
        clock.use(previous)


@contextlib.contextmanager
def pool_with_a_taken_driver(tmp_path, **held):
    """A one-driver pool whose driver has taken an attempt, and the file that lets it commit."""
    commit = str(tmp_path / "commit")
    pool = WarmPool(1, [sys.executable, "-c", DRIVER, "--commit-when", commit], dict(os.environ), **held)
    try:
        pool.refill()
        wait_for(lambda: pool.refill() or (pool.idle and pool.idle[0].ready), 60, interval=0.05,
                 message="the warm driver ready")
        taken = pool.take("job", 1, {}, DriverLog(str(tmp_path / "attempt-1.log"), ()))
        assert taken is not None and pool.starting
        try:
            yield pool, taken, commit
        finally:
            taken.kill()         # the worker's to stop, as any driver
            taken.wait()
    finally:
        pool.close()


def _refilled(pool: WarmPool) -> bool:
    pool.refill()
    return bool(pool.idle)


def test_the_refill_waits_for_the_attempts_first_commit_not_a_fixed_20_s(tmp_path, moved_clock):
    with pool_with_a_taken_driver(tmp_path) as (pool, taken, commit):
        for seconds in (21, 90):      # past the old fixed 20 s; 72 s was a first checkpoint at load 8
            moved_clock[0] = seconds
            assert not _refilled(pool), f"a warm driver started beside the attempt {seconds} s after it took it"
        open(commit, "w").close()
        wait_for(lambda: _refilled(pool), 30, interval=0.05, message="the refill once the attempt committed")
        assert pool.idle[0].pid != taken.pid


def test_an_attempt_that_never_commits_holds_the_refill_for_the_cap_alone(tmp_path, moved_clock):
    with pool_with_a_taken_driver(tmp_path, refill_held_at_most=40.0) as (pool, taken, commit):
        moved_clock[0] = 39
        assert not _refilled(pool)
        moved_clock[0] = 40
        assert _refilled(pool), "the pool stays empty past its cap for an attempt that commits nothing"


def test_a_taken_driver_that_exits_releases_the_refill_at_once(tmp_path, moved_clock):
    with pool_with_a_taken_driver(tmp_path) as (pool, taken, commit):
        assert not _refilled(pool)
        taken.kill()
        taken.wait()
        wait_for(lambda: _refilled(pool), 30, interval=0.05, message="the refill once the taken driver exited")
