"""The driver's heartbeat: liveness proven independently of progress.

A background thread writes the attempt's heartbeat every ``interval`` seconds and
brings back the job's desired state (so a cancel or savepoint request reaches the
driver within one interval). If the attempt was fenced off, or the store could not be
reached for ``self_fence_after`` seconds, the driver can no longer prove it is the
current attempt and stops itself (``on_fenced``) rather than risk running twice.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from seatide import clock
from seatide.store.db import AttemptFenced

log = logging.getLogger(__name__)

FENCED_EXIT_CODE = 75


def exit_fenced() -> None:
    log.error("attempt fenced off; exiting")
    os._exit(FENCED_EXIT_CODE)


class Heartbeat:
    def __init__(self, reporter, interval: float = 1.0, self_fence_after: float = 10.0,
                 on_fenced: Callable[[], None] = exit_fenced):
        self.reporter = reporter
        self.interval = interval
        self.self_fence_after = self_fence_after
        self.on_fenced = on_fenced
        self.desired = "RUN"
        self.fenced = False
        self._stop = threading.Event()
        self._last_ok = clock.now()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def start(self) -> "Heartbeat":
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        if self.reporter.ended:   # the attempt's end is recorded: nothing left to prove
            self._stop.set()
            return
        try:
            self.desired = self.reporter.heartbeat() or "RUN"
            self._last_ok = clock.now()
        except AttemptFenced:
            self._fence()
        except Exception as exc:  # store unreachable: keep trying until the self-fence deadline
            log.warning("heartbeat failed: %s", exc)
            if clock.now() - self._last_ok > self.self_fence_after:
                self._fence()

    def _fence(self) -> None:
        self.fenced = True
        self._stop.set()
        self.on_fenced()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        self._stop.set()
