"""A worker: registers, heartbeats, launches a driver per attempt assigned to it, supervises it.

Launching is idempotent: an attempt is claimed with a compare-and-set from ASSIGNED to
LAUNCHING, so however often or concurrently it is seen, one process starts. Drivers die
with their worker (``PR_SET_PDEATHSIG``), so a lost worker leaves no driver behind; the
coordinator counts on that before it starts a replacement attempt elsewhere.

A worker may keep warm drivers (``worker/warm_pool.py``): it claims the attempt the same
way, then hands it to one instead of starting a process.

The worker records a driver's exit the moment it reaps it (``ended_at``: the process is
surely gone), and kills its drivers whose attempt the leader declared lost.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading

from sqlalchemy import and_, select, update

from seatide import clock, failpoints
from seatide.coordinator.service import node_heartbeat, register_node
from seatide.runtime.session import SPARK_CONF_ENV, warm_session_fit
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.db import Store, record_event
from seatide.store.paths import driver_log_path
from seatide.store.states import ATTEMPT_LIVE
from seatide.timeouts import Timeouts
from seatide.runtime.warm_driver import warm_session_conf
from seatide.worker.warm_pool import WarmPool, warm_command

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ProcessLauncher:
    """Starts driver processes. The deterministic simulation passes its own, a simulated
    process table whose objects answer ``pid``, ``poll()``, ``kill()``, ``wait()`` and
    ``returncode`` as a ``subprocess.Popen`` does."""

    def start(self, command: list[str], log_file, env: dict[str, str], inherit_stdout: bool):
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=None if inherit_stdout else log_file,
                                stderr=log_file, preexec_fn=_die_with_parent, env=env)


class Worker:
    def __init__(self, store: Store, store_url: str, data_dir: str, node_id: str | None = None,
                 slots: int = 2, poll: float = 0.25, inherit_stdout: bool = False,
                 timeouts: Timeouts = Timeouts(), launcher: ProcessLauncher | None = None,
                 warm_drivers: int = 0):
        self.store = store
        self.store_url = store_url
        self.data_dir = os.path.abspath(data_dir)
        self.node_id = node_id or f"worker-{socket.gethostname()}-{os.getpid()}"
        self.slots = slots
        self.poll = poll
        self.inherit_stdout = inherit_stdout
        # driver_exit_grace: a driver that has reported its attempt's end still stops Spark
        # and flushes its log; it is killed only if it has not exited that long after.
        self.timeouts = timeouts.check()
        self.launcher = launcher or ProcessLauncher()
        self.children: dict[int, subprocess.Popen] = {}     # attempt_id -> driver process
        self._reported_end: dict[int, float] = {}             # attempt_id -> when we saw its end
        self._stop = threading.Event()
        self._wake = threading.Event()
        # warm_drivers: idle drivers kept started (0: every attempt starts a cold one)
        self.warm_pool = WarmPool(warm_drivers, warm_command(
            store_url, self.timeouts.driver_heartbeat_interval, self.timeouts.driver_self_fence_after),
            self._driver_env(None))

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> None:
        """The worker loop; drivers die with the thread that runs it, so keep it long-lived."""
        register_node(self.store, self.node_id, "worker", slots=self.slots)
        last_beat = 0.0
        while not self._stop.is_set():
            try:
                if clock.now() - last_beat >= self.timeouts.worker_heartbeat_interval:
                    node_heartbeat(self.store, self.node_id)
                    last_beat = clock.now()
                self.step()
                self.warm_pool.refill()      # in this thread: warm drivers die with it too
            except Exception:
                log.exception("worker step failed")
            self._wake.wait(self.poll)
            self._wake.clear()
        self._shutdown()

    def wake(self) -> None:
        """Look for work now (local mode: the embedded coordinator just assigned an attempt)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _shutdown(self) -> None:
        """Drivers of ended jobs may finish reporting their end; the others die now."""
        self.warm_pool.close()
        ending = self._children_of_ended_jobs()
        deadline = clock.now() + self.timeouts.driver_exit_grace
        for attempt_id, proc in list(self.children.items()):
            if proc.poll() is None and attempt_id in ending:
                try:
                    proc.wait(timeout=max(0.0, deadline - clock.now()))
                except subprocess.TimeoutExpired:
                    log.warning("driver pid %s of attempt %s did not exit within %.0f s of its job's end",
                                proc.pid, attempt_id, self.timeouts.driver_exit_grace)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            self.record_exit(attempt_id, proc.returncode)
        try:
            node_heartbeat(self.store, self.node_id, stopped=True)
        except Exception:
            pass

    # -- one pass ----------------------------------------------------------------------------
    def step(self) -> None:
        with self.store.read() as conn:
            mine = conn.execute(select(s.attempts).where(and_(
                s.attempts.c.worker_id == self.node_id, s.attempts.c.ended_at.is_(None)))).all()
        for attempt in mine:
            if attempt.state == "ASSIGNED":
                self._launch(attempt)
            elif attempt.kill_requested:
                self._kill(attempt)
            elif attempt.state not in ATTEMPT_LIVE:
                self._await_exit(attempt)
        for attempt_id, proc in list(self.children.items()):
            if proc.poll() is not None:
                self.record_exit(attempt_id, proc.returncode)

    def claim(self, attempt) -> bool:
        with self.store.write() as conn:
            claimed = conn.execute(update(s.attempts).where(and_(
                s.attempts.c.attempt_id == attempt.attempt_id, s.attempts.c.worker_id == self.node_id,
                s.attempts.c.state == "ASSIGNED")).values(state="LAUNCHING",
                                                          launched_at=store_now(conn))).rowcount
            if claimed:
                record_event(conn, "DRIVER_LAUNCHING", f"worker:{self.node_id}", attempt.job_id,
                             attempt.incarnation, attempt=attempt.attempt_id)
        return claimed == 1

    def _launch(self, attempt) -> None:
        if attempt.attempt_id in self.children or not self.claim(attempt):
            return
        failpoints.hit("worker.after_claim")
        log_path = driver_log_path(self.data_dir, attempt.job_id, attempt.attempt_id)
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        command = [sys.executable, "-m", "seatide.runtime.driver", "driver", "--store", self.store_url,
                   "--job-id", attempt.job_id, "--attempt", str(attempt.attempt_id),
                   "--heartbeat-interval", str(self.timeouts.driver_heartbeat_interval),
                   "--self-fence-after", str(self.timeouts.driver_self_fence_after)]
        conf = self._spark_conf(attempt.job_id)
        proc = self._hand_to_warm_driver(attempt, conf, log_path)
        if proc is None:
            with open(log_path, "ab") as log_file:
                proc = self.launcher.start(command, log_file, self._driver_env(conf), self.inherit_stdout)
        self.children[attempt.attempt_id] = proc
        failpoints.hit("worker.after_launch")
        with self.store.write() as conn:
            conn.execute(update(s.attempts).where(and_(
                s.attempts.c.attempt_id == attempt.attempt_id, s.attempts.c.pid.is_(None)))
                .values(pid=proc.pid))
        log.info("launched driver pid %s for job %s attempt %s", proc.pid, attempt.job_id, attempt.attempt_id)

    def _hand_to_warm_driver(self, attempt, conf: dict | None, log_path: str):
        """A warm driver's process, now running the claimed attempt; None: start a cold one."""
        if not self.warm_pool.size or conf is None:      # None: a config error the driver reports
            return None
        fit = warm_session_fit(conf, warm_session_conf())
        if fit.cold_because is not None:
            log.info("job %s attempt %s gets a cold driver: %s", attempt.job_id, attempt.attempt_id,
                     fit.cold_because)
            return None
        return self.warm_pool.take(attempt.job_id, attempt.attempt_id, fit.runtime_conf, log_path)

    def _driver_env(self, conf: dict | None) -> dict[str, str]:
        env = dict(os.environ)
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        env.setdefault("PYTHONUNBUFFERED", "1")
        if conf is not None:   # lets the driver start its JVM while it reads the rest of the job
            env[SPARK_CONF_ENV] = json.dumps(conf)
        return env

    def _spark_conf(self, job_id: str) -> dict | None:
        from seatide.config.loader import ConfigError, load_job_env, spark_conf_for
        from seatide.plugin.options import OptionError

        with self.store.read() as conn:
            job = conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()
        try:
            return spark_conf_for(load_job_env(job.config, json.loads(job.variables)))
        except (ConfigError, OptionError):
            return None   # the driver reports the config error itself

    def _children_of_ended_jobs(self) -> set[int]:
        from seatide.store.states import JOB_TERMINAL

        if not self.children:
            return set()
        try:
            with self.store.read() as conn:
                rows = conn.execute(select(s.attempts.c.attempt_id, s.attempts.c.state, s.jobs.c.status).select_from(
                    s.attempts.join(s.jobs, s.attempts.c.job_id == s.jobs.c.job_id)).where(
                    s.attempts.c.attempt_id.in_(list(self.children)))).all()
        except Exception:
            log.exception("cannot read the children's jobs; their drivers are killed")
            return set()
        return {row.attempt_id for row in rows if row.status in JOB_TERMINAL or row.state not in ATTEMPT_LIVE}

    def _await_exit(self, attempt) -> None:
        """The driver reported its attempt's end: let it exit by itself, within the grace."""
        proc = self.children.get(attempt.attempt_id)
        if proc is None or proc.poll() is not None:
            self._kill(attempt)      # not ours, or gone: record it
            return
        seen = self._reported_end.setdefault(attempt.attempt_id, clock.now())
        if clock.now() - seen > self.timeouts.driver_exit_grace:
            self._kill(attempt, f"it did not exit within {self.timeouts.driver_exit_grace:.0f} s of reporting "
                                f"its attempt {attempt.state}")

    def _kill(self, attempt, why: str | None = None) -> None:
        proc = self.children.get(attempt.attempt_id)
        if proc is not None and proc.poll() is None:
            log.warning("killing driver pid %s of attempt %s (%s)", proc.pid, attempt.attempt_id,
                        why or attempt.error or attempt.state)
            proc.kill()
        elif proc is None and attempt.pid is not None and attempt.state not in ATTEMPT_LIVE:
            # Not our child (we restarted?) or already gone: nothing to reap, record it.
            from seatide.coordinator.service import kill_if_reachable
            kill_if_reachable(attempt, self.store_url)
            self.record_exit(attempt.attempt_id, None)

    def record_exit(self, attempt_id: int, code: int | None) -> None:
        """The driver process is gone: record it, and fail the attempt if it ended silently."""
        self.children.pop(attempt_id, None)
        self._reported_end.pop(attempt_id, None)
        now = clock.now()
        with self.store.write() as conn:
            attempt = conn.execute(select(s.attempts).where(s.attempts.c.attempt_id == attempt_id)).first()
            if attempt is None:
                log.info("driver of attempt %s exited (code %s) after its job was cleaned up; nothing to record",
                         attempt_id, code)
                return
            if attempt.ended_at is not None:
                return
            values: dict = {"ended_at": now, "exit_code": code}
            if attempt.state in ATTEMPT_LIVE:
                values.update(state="FAILED", error=attempt.error or _exit_message(code))
            conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == attempt_id).values(**values))
            record_event(conn, "DRIVER_EXITED", f"worker:{self.node_id}", attempt.job_id, attempt.incarnation,
                         attempt=attempt_id, exit_code=code)


def _exit_message(code: int | None) -> str:
    if code is not None and code < 0:
        return f"driver process killed by signal {signal.Signals(-code).name}"
    return f"driver process exited with code {code} before reporting its end"


