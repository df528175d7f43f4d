"""Child processes that die with the process that started them (``PR_SET_PDEATHSIG``).

A worker's drivers die with the worker; a driver's JVM dies with the driver. Linux sends the
signal when the *thread* that forked the child ends, not when its process does, so such a
child is forked from a thread that lives as long as its process: the worker forks drivers
from its loop thread, and a driver forks its JVM from a thread of its own that never ends
(``in_lifelong_thread``: Spark may be started from a pool thread, which ends when its pool is
collected, and the JVM would die with it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL("libc.so.6", use_errno=True)    # loaded here: a forked child only calls it


def dying_with(parent: int, before: Callable[[], None] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: the child is SIGKILLed when the thread of ``parent`` (this process's pid,
    read before the fork) that forked it ends; at once if ``parent`` has already gone (the
    child was re-parented before it asked). ``before``: another ``preexec_fn`` to run first."""
    def preexec() -> None:
        if before is not None:
            before()
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
    return preexec


def in_lifelong_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` run in a new thread that then waits for ever (until the process ends), so that
    a child ``fn`` forks with ``dying_with`` lives exactly as long as this process."""
    result: Future = Future()

    def run() -> None:
        try:
            result.set_result(fn())
        except BaseException as exc:       # handed to the caller
            result.set_exception(exc)
        threading.Event().wait()

    threading.Thread(target=run, name=name, daemon=True).start()
    return result.result()
