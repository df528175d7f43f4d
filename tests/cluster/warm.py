"""Reading a worker's warm drivers from outside: the process table and the worker's log."""

from __future__ import annotations

import re

import psutil

from seatide.runtime.warm_driver import JOB_ID_SLOT
from seatide.testing.cluster import wait_for

_READY = re.compile(r"warm driver pid (\d+): .*Spark is ready")


def warm_pids(worker) -> list[int]:
    """The worker's idle warm drivers (one given an attempt names that attempt instead)."""
    pids = []
    for child in psutil.Process(worker.popen.pid).children():
        try:
            argv = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "seatide.runtime.driver" in argv and JOB_ID_SLOT in argv:
            pids.append(child.pid)
    return pids


def ready_warm_pid(worker, other_than: set[int] = frozenset(), timeout: float = 180) -> int:
    """An idle warm driver of ``worker`` whose Spark session is up (the worker logs it)."""
    def ready():
        with open(worker.log_path, errors="replace") as handle:
            said_ready = {int(pid) for pid in _READY.findall(handle.read())}
        return next((pid for pid in warm_pids(worker) if pid in said_ready and pid not in other_than), None)
    return wait_for(ready, timeout, message="a ready warm driver")
