"""The driver's heartbeat: liveness proven independently of progress.

A background thread writes the attempt's heartbeat every ``interval`` seconds and
brings back the job's desired state (so a cancel or savepoint request reaches the
driver within one interval). If the attempt was fenced off, or the store could not be
reached for ``self_fence_after`` seconds, the driver can no longer prove it is the
current attempt and stops itself (``on_fenced``) rather than risk running twice.

The leader replaces a silent driver only after ``driver_hung_after``, which
``Timeouts.check`` keeps at least ``self_fence_after + interval + margin``. So the
self-fence deadline is counted on the monotonic clock from the *start* of the last
heartbeat that landed (the store's heartbeat time is no earlier), and watched by its
own thread: a heartbeat stuck in a store call (a held lock, a dead TCP peer) does not
keep the driver running past it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from seatide import clock
from seatide.store.db import AttemptFenced
from seatide.timeouts import Timeouts

log = logging.getLogger(__name__)

FENCED_EXIT_CODE = 75


def exit_fenced() -> None:
    log.error("attempt fenced off; exiting")
    os._exit(FENCED_EXIT_CODE)


class Heartbeat:
    def __init__(self, reporter, interval: float = Timeouts.driver_heartbeat_interval,
                 self_fence_after: float = Timeouts.driver_self_fence_after,
                 on_fenced: Callable[[], None] = exit_fenced):
        self.reporter = reporter
        self.interval = interval
        self.self_fence_after = self_fence_after
        self.on_fenced = on_fenced
        self.desired = "RUN"
        self.fenced = False
        self._stop = threading.Event()
        self._fence_once = threading.Lock()
        self._last_ok = clock.monotonic()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._deadline = threading.Thread(target=self._watch_deadline, name="self-fence", daemon=True)
        # A store step whose session the server ended is taken again while the attempt's fence
        # holds, up to the self-fence (runtime/reporter.py); past it this driver stops anyway.
        reporter.fence_holds = lambda: not self.fenced
        reporter.keep_trying_for = self_fence_after

    def start(self) -> "Heartbeat":
        self.beat()
        self._thread.start()
        self._deadline.start()
        return self

    def beat(self) -> None:
        if self.reporter.ended:   # the attempt's end is recorded: nothing left to prove
            self._stop.set()
            return
        began = clock.monotonic()
        try:
            self.desired = self.reporter.heartbeat() or "RUN"
            self._last_ok = began
        except AttemptFenced:
            if self.reporter.ending:
                # Our own end landed while this beat was in flight (the attempt is SUCCEEDED
                # or FAILED by our word): nothing to fence. Had another attempt replaced us,
                # the end's own write is refused and the driver exits fenced from there.
                self._stop.set()
                return
            self._fence()
        except Exception as exc:  # store unreachable: keep trying until the self-fence deadline
            log.warning("heartbeat failed: %s", exc)
            self._check_deadline()

    def _watch_deadline(self) -> None:
        while not self._stop.wait(self.interval):
            self._check_deadline()

    def _check_deadline(self) -> None:
        silent = clock.monotonic() - self._last_ok
        if silent > self.self_fence_after and not self.reporter.ended:
            log.error("no heartbeat landed for %.1f s (self-fence after %.1f s)", silent, self.self_fence_after)
            self._fence()

    def _fence(self) -> None:
        if not self._fence_once.acquire(blocking=False):
            return       # the other thread is fencing already
        self.fenced = True
        self._stop.set()
        self.on_fenced()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        self._stop.set()
