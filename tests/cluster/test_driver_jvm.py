"""A driver's JVM dies with the driver (issue 30, finding 22).

A driver process builds its session as a cold driver does (``runtime/driver.py``: from a pool
thread, whose pool is then dropped), runs a query, and is SIGKILLed. Its JVM, stopped first
so that it cannot notice by itself (its stdin closing), must be gone at once: killed by
``PR_SET_PDEATHSIG``. Before, a JVM ended only by reading the end of its stdin and running
Spark's shutdown hooks: about a second after its driver (measured 0.9-1.5 s, its streaming
query logging on meanwhile), and never while it could not read. The query run after the pool
thread has ended shows the JVM is tied to the process, not to the thread that started it.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys

import pytest

from seatide.testing.driver_processes import exited
from seatide.testing.cluster import wait_for

pytestmark = pytest.mark.cluster

DRIVER = r"""
import gc, sys, time
from concurrent.futures import ThreadPoolExecutor
from seatide.runtime.session import build_session

spark = ThreadPoolExecutor(max_workers=1).submit(build_session, "jvm-tie", {"spark.master": "local[1]"}).result()
gc.collect()
time.sleep(1.0)          # the pool and its thread are gone
assert spark.range(3).count() == 3
print("READY", flush=True)
time.sleep(600)
"""


def _jvm_children(pid: int) -> list[int]:
    """Children of ``pid`` forked by any of its threads that run java."""
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with open(path) as handle:
            for child in handle.read().split():
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                        if b"java" in cmdline.read().split(b"\0")[0]:
                            found.append(int(child))
                except OSError:
                    pass
    return found


def test_a_drivers_jvm_dies_with_it_even_when_it_cannot_notice(tmp_path):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True,
                              cwd=str(tmp_path))
    jvms: list[int] = []
    try:
        assert driver.stdout.readline().strip() == "READY", "the session did not outlive its pool thread"
        jvms = _jvm_children(driver.pid)
        assert len(jvms) == 1, jvms
        os.kill(jvms[0], signal.SIGSTOP)       # it cannot read the end of its stdin now
        driver.kill()
        driver.wait()
        wait_for(lambda: exited(jvms[0]), 5, interval=0.05, message="the JVM to die with its driver")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in jvms:
            try:
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
