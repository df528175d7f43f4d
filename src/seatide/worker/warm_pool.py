"""A worker's pool of warm drivers: driver processes that started Python, PySpark, SeaTide
and a SparkSession with the default settings before any attempt needed them.

The worker still claims each attempt with its compare-and-set (ASSIGNED -> LAUNCHING);
only then does it hand the attempt to a warm driver, instead of starting a process. So
one driver per attempt, fencing, the driver's heartbeat and self-fence, its exit code and
the worker's ``record_exit`` are those of a cold driver. The driver side of the protocol,
and why the command line changes at the hand-over, is in ``runtime/warm_driver.py``.

* Warm drivers die with their worker (``PR_SET_PDEATHSIG``, and end of file on stdin).
  They must be started from the worker's long-lived loop thread, as cold drivers are.
* A warm driver runs one attempt and exits; the pool starts its replacement once that
  attempt has committed its first batch or the driver is gone (``--warm-refill-hold`` at
  most), not beside the attempt's start-up. One that dies idle is replaced too, after a
  backoff if they keep dying (a broken Spark must not turn the worker into a fork loop).
* A job whose Spark settings a running session cannot take gets a cold driver
  (``runtime.session.warm_session_fit``).
* Warm drivers are not slots: they run nothing until given an attempt, but each holds a
  JVM (about 300-500 MB resident), which is what ``--warm-drivers`` trades for start-up.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
from typing import Callable

from seatide import clock
from seatide.runtime.parent_death import dying_with
from seatide.runtime.warm_driver import READY, STARTED, TAKEN, fits_command_line, placeholder_args
from seatide.timeouts import Timeouts
from seatide.worker.driver_log import DriverLog

log = logging.getLogger(__name__)

# An idle warm driver that took longer than this to acknowledge its attempt is treated as
# having taken it anyway: it is the attempt's driver now, and its heartbeat (or its exit)
# tells the truth about it from here on. Short: the worker's loop (and its heartbeat) waits.
HAND_OVER_ACK_TIMEOUT = 2.0
MAX_RESTART_BACKOFF = 60.0


class WarmDriver:
    """One warm driver process and the relay that copies its output where it belongs."""

    def __init__(self, proc: subprocess.Popen, signals_fd: int):
        self.proc = proc
        self.pid = proc.pid
        self.started_at = clock.now()
        self.ready = False
        self.started = False         # the attempt it took has committed its first batch
        self.taken_at: float | None = None
        self._signals_fd = signals_fd
        self._sink: DriverLog | None = None           # None: the worker's log, while idle
        self._lock = threading.Lock()
        threading.Thread(target=self._relay, name=f"warm-driver-{proc.pid}-log", daemon=True).start()

    def _relay(self) -> None:
        """Until every holder of the pipe (the driver and its JVM) is gone."""
        for line in iter(self.proc.stdout.readline, b""):
            with self._lock:
                sink = self._sink
                if sink is None:
                    log.info("warm driver pid %s: %s", self.pid, line.decode(errors="replace").rstrip())
                else:
                    sink.write(line)
        with self._lock:
            if self._sink is not None:
                self._sink.close()
        self.proc.stdout.close()

    def read_signals(self, timeout: float = 0.0) -> bytes:
        """The bytes the driver sent on its signal pipe (READY, TAKEN), waiting up to ``timeout``."""
        if self._signals_fd < 0:
            return b""
        readable, _, _ = select.select([self._signals_fd], [], [], timeout)
        if not readable:
            return b""
        data = os.read(self._signals_fd, 16)
        if not data:                       # the driver is gone
            os.close(self._signals_fd)
            self._signals_fd = -1
        if READY in data:
            self.ready = True
        if STARTED in data:
            self.started = True
        return data

    def hand_over(self, job_id: str, attempt_id: int, runtime_conf: dict[str, str], sink: DriverLog) -> bool:
        """Give the driver its attempt, its output from now on to ``sink`` (the attempt's log,
        masked). False: it was already gone and has not seen the attempt."""
        with self._lock:
            self._sink = sink        # from here on its output is the attempt's log
        order = json.dumps({"job_id": job_id, "attempt": attempt_id, "runtime_conf": runtime_conf})
        try:
            self.proc.stdin.write(order.encode() + b"\n")
            self.proc.stdin.close()
        except OSError:                    # BrokenPipeError: it died idle, it never read the order
            with self._lock:
                self._sink = None
            sink.close()
            return False
        deadline = clock.monotonic() + HAND_OVER_ACK_TIMEOUT
        while TAKEN not in self.read_signals(max(0.0, deadline - clock.monotonic())):
            if self._signals_fd < 0 or clock.monotonic() >= deadline:
                log.warning("warm driver pid %s did not acknowledge attempt %s; it is the attempt's driver "
                            "all the same", self.pid, attempt_id)
                break
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close_signals()

    def holds_refill(self, at_most: float) -> bool:
        """Whether this driver, given an attempt, still holds back its replacement: its attempt
        has not committed a batch (STARTED), it is not gone (its signal pipe is open), and it
        took the attempt less than ``at_most`` ago. A JVM starting beside the attempt's own
        start-up would take half of a 2-core host from it; the first commit, not a fixed
        time, says the start-up is over (on a loaded host it took 72 s)."""
        self.read_signals()
        return not self.started and not self.signals_closed and clock.now() - self.taken_at < at_most

    @property
    def signals_closed(self) -> bool:
        return self._signals_fd < 0

    def close_signals(self) -> None:
        if self._signals_fd >= 0:
            os.close(self._signals_fd)
            self._signals_fd = -1


class WarmPool:
    """Keeps ``size`` idle warm drivers; ``take`` hands one out, ``refill`` replaces it."""

    def __init__(self, size: int, command: list[str], env: dict[str, str],
                 refill_held_at_most: float = Timeouts.warm_refill_hold):
        if size < 0:
            raise ValueError(f"--warm-drivers must be 0 or more, not {size}")
        self.size = size
        self.command = command           # a driver's command line up to the attempt's flags
        self.env = env
        self.refill_held_at_most = refill_held_at_most      # --warm-refill-hold (WarmDriver.holds_refill)
        self.idle: list[WarmDriver] = []
        self.handing: WarmDriver | None = None     # being handed an attempt (not yet the worker's child)
        self.starting: list[WarmDriver] = []     # taken, holding the refill (WarmDriver.holds_refill)
        self._deaths_in_a_row = 0
        self._next_start = 0.0

    def refill(self) -> None:
        """Drop idle drivers that died, note those now ready, start what is missing. Call it
        from the worker's loop thread only: PR_SET_PDEATHSIG follows the starting thread."""
        for driver in list(self.idle):
            driver.read_signals()
            if driver.ready:
                self._deaths_in_a_row = 0
            if driver.proc.poll() is not None:
                self.idle.remove(driver)
                driver.kill()
                self._deaths_in_a_row += 1
                delay = min(MAX_RESTART_BACKOFF, 2.0 ** (self._deaths_in_a_row - 1))
                self._next_start = clock.now() + delay
                log.warning("warm driver pid %s exited while idle (code %s); another starts in %.0f s",
                            driver.pid, driver.proc.returncode, delay)
        for driver in list(self.starting):
            if not driver.holds_refill(self.refill_held_at_most):
                if not driver.started and not driver.signals_closed:
                    log.info("warm driver pid %s: its attempt has committed nothing in %.0f s "
                             "(--warm-refill-hold); its replacement starts", driver.pid, self.refill_held_at_most)
                self.starting.remove(driver)
                driver.close_signals()
        while len(self.idle) < self.size and not self.starting and clock.now() >= self._next_start:
            self.idle.append(self._start())

    def take(self, job_id: str, attempt_id: int, runtime_conf: dict[str, str], attempt_log: DriverLog,
             go_on: Callable[[], bool] = lambda: True):
        """Hand a claimed attempt to an idle warm driver (a ready one first, else the oldest):
        its ``subprocess.Popen``, or None when no warm driver could take it. ``go_on`` is asked
        before each hand-over, with the driver already ``handing``: false (the worker's drivers
        were fenced), none is handed the attempt; and a fence from then on kills the one being
        handed it (``kill_handing``), which the worker does not yet count among its children."""
        if not fits_command_line(job_id, attempt_id):
            return None
        for driver in sorted(self.idle, key=lambda d: (not d.ready, d.started_at)):
            self.idle.remove(driver)
            self.handing = driver
            try:
                handed = go_on() and driver.proc.poll() is None and driver.hand_over(
                    job_id, attempt_id, runtime_conf, attempt_log)
            finally:
                self.handing = None
            if handed:
                # From here on the worker supervises it as any driver; the pool only listens
                # for STARTED, to refill.
                driver.taken_at = clock.now()
                self.starting.append(driver)
                log.info("warm driver pid %s (started %.1f s ago, %s) runs job %s attempt %s", driver.pid,
                         clock.now() - driver.started_at, "ready" if driver.ready else "still warming",
                         job_id, attempt_id)
                return driver.proc
            driver.kill()
            if not go_on():
                return None
        return None

    def kill_handing(self) -> None:
        """The worker's liveness fence: the driver being handed an attempt dies with the rest."""
        driver = self.handing
        if driver is not None and driver.proc.poll() is None:
            driver.proc.kill()

    def close(self) -> None:
        """The worker stops: idle warm drivers have nothing to finish."""
        for driver in self.idle:
            driver.kill()
        self.idle.clear()
        for driver in self.starting:     # the worker's own: it stops them as any driver
            driver.close_signals()
        self.starting.clear()

    def _start(self) -> WarmDriver:
        signals_read, signals_write = os.pipe()
        try:
            proc = subprocess.Popen(
                [*self.command, *placeholder_args(), "--ready-fd", str(signals_write)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(signals_write,), preexec_fn=dying_with(os.getpid()), env=self.env)
        except BaseException:
            os.close(signals_read)
            raise
        finally:
            os.close(signals_write)
        log.info("warm driver pid %s starting", proc.pid)
        return WarmDriver(proc, signals_read)


def warm_command(store_url: str, heartbeat_interval: float, self_fence_after: float) -> list[str]:
    return [sys.executable, "-m", "seatide.runtime.driver", "warm", "--store", store_url,
            "--heartbeat-interval", str(heartbeat_interval), "--self-fence-after", str(self_fence_after)]
