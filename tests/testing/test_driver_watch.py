"""The driver watch's reading of the process table: a process seen once as no driver is not
read again after a grace, but one that execs into a driver within it is seen, and a driver
stays seen whatever it was before."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

from seatide.testing.driver_processes import SettledProcesses, driver_pids

# Turns into a "driver" (a command line naming SeaTide's driver module and a job) by exec once
# it reads a byte on stdin: what a launcher's fork does, held here until the test has looked.
EXEC_LATER = ("import os, sys\n"
              "job = sys.argv[1]\n"
              "sys.stdin.read(1)\n"
              "os.execv(sys.executable, [sys.executable, '-c', 'import sys; sys.stdin.read()',"
              " 'seatide.runtime.' + 'driver', '--job-id', job])\n")     # the name only after the exec


def _until(condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_process_that_execs_into_a_driver_after_a_look_is_seen_and_stays_seen():
    job = f"watch-{uuid.uuid4().hex[:8]}"
    settled = SettledProcesses()
    proc = subprocess.Popen([sys.executable, "-c", EXEC_LATER, job], stdin=subprocess.PIPE)
    try:
        # looked at while it is no driver yet (until its command line is its own, it is the test's)
        assert _until(lambda: proc.pid in _read_pids(settled)), "the process was never read"
        assert driver_pids(job, settled=settled) == []
        proc.stdin.write(b"x")
        proc.stdin.flush()
        assert _until(lambda: driver_pids(job, settled=settled) == [proc.pid]), "the exec'd driver was not seen"
        # however long it lives from here, it is read on every look
        settled.GRACE_S = 0.0
        for _ in range(3):
            assert driver_pids(job, settled=settled) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert _until(lambda: driver_pids(job, settled=settled) == [])


def test_a_pid_that_left_the_table_is_forgotten():
    settled = SettledProcesses()
    settled.GRACE_S = 0.0
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _until(lambda: proc.pid in _read_pids(settled))
        assert settled.settled(str(proc.pid))
    finally:
        proc.kill()
        proc.wait()
    driver_pids(settled=settled)
    assert proc.pid not in _read_pids(settled)


def test_a_process_first_seen_long_ago_but_not_read_since_is_read_before_it_is_skipped():
    """Seen once before its exec, then not looked at for longer than the grace (the watch
    starved): what it became is read, not assumed from its age."""
    job = f"watch-{uuid.uuid4().hex[:8]}"
    settled = SettledProcesses()
    proc = subprocess.Popen([sys.executable, "-c", EXEC_LATER, job], stdin=subprocess.PIPE)
    try:
        assert _until(lambda: proc.pid in _read_pids(settled))
        settled._first_seen[str(proc.pid)] -= 10 * settled.GRACE_S      # first seen long ago
        proc.stdin.write(b"x")
        proc.stdin.flush()
        assert _until(lambda: _exec_done(proc.pid)), "the process never exec'd"      # read here, not by the watch
        assert driver_pids(job, settled=settled) == [proc.pid], "the exec'd driver was skipped"
    finally:
        proc.kill()
        proc.wait()


def test_a_gap_between_looks_forgets_what_was_settled():
    settled = SettledProcesses()
    settled.GRACE_S = 0.0
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        def settled_now() -> bool:
            _read_pids(settled)
            return settled.settled(str(proc.pid))
        assert _until(settled_now)
        settled._last_look -= 2 * settled.GAP_S          # the watch did not look for a while
        settled.look([str(proc.pid)], time.monotonic())
        assert not settled.settled(str(proc.pid))
    finally:
        proc.kill()
        proc.wait()


def _exec_done(pid: int) -> bool:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return b"seatide.runtime.driver" in handle.read()


def _read_pids(settled: SettledProcesses) -> set:
    """The pids the last look read (or skipped as settled)."""
    driver_pids("no-such-job", settled=settled)
    return {int(pid) for pid in settled._first_seen}
