"""A worker: registers, heartbeats, launches a driver per attempt assigned to it, supervises it.

Launching is idempotent (``worker/launch.py``): an attempt is claimed with a compare-and-set,
so however often or concurrently it is seen, one process starts. Drivers die
with their worker (``PR_SET_PDEATHSIG``), so a lost worker leaves no driver behind; the
coordinator counts on that before it starts a replacement attempt elsewhere.

A worker may keep warm drivers (``worker/warm_pool.py``): it claims the attempt the same
way, then hands it to one instead of starting a process.

The worker records a driver's exit the moment it reaps it (``ended_at``: the process is
surely gone), and kills its drivers whose attempt the leader declared lost.

With liveness locks the worker holds ``worker-<node id>`` for its life (taken before it
registers), so the leader sees its death at once. If the lock is ever lost while the
worker lives (its PostgreSQL lock session ended), the leader may already be replacing its
drivers: they live on only if it is back in time (``worker/lock_regain.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading

from sqlalchemy import and_, select, update

from seatide import clock
from seatide.coordinator.service import node_heartbeat, register_node
from seatide.runtime.heartbeat import FENCED_EXIT_CODE
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.events import record_event, run_of_incarnation
from seatide.store.db import Store
from seatide.store.liveness import Liveness, worker_lock
from seatide.store.sessions import again_on_new_session
from seatide.store.states import ATTEMPT_LIVE, AttemptState
from seatide.store.wakeups import AssignmentListener
from seatide.timeouts import Timeouts
from seatide.worker.driver_log import LOG_MASKING
from seatide.worker.launcher import ProcessLauncher
from seatide.worker.lock_regain import LockRegain
from seatide.worker.launch import UNLAUNCHED, DriverLaunch
from seatide.worker.presence import Presence
from seatide.worker.warm_pool import WarmPool, warm_command

log = logging.getLogger(__name__)

OUTAGE_KILL = ("killed by its worker, whose liveness lock's store session ended (a restart or failover of the "
               "store): not the job's failure, retried without counting against job.retry.times")

class Worker(Presence, DriverLaunch):
    """One worker's loop: claim the attempts assigned to it, launch or hand them to warm drivers,
    supervise and record their exits. Its presence (liveness lock, heartbeat) is the mixin's
    (``presence.py``)."""

    def __init__(self, store: Store, store_url: str, data_dir: str, node_id: str | None = None,
                 slots: int = 2, poll: float = 0.25, inherit_stdout: bool = False,
                 timeouts: Timeouts = Timeouts(), launcher: ProcessLauncher | None = None,
                 spark_conf: dict[str, str] | None = None, liveness: Liveness | None = None,
                 warm_drivers: int = 0):
        self.store = store
        self.liveness = liveness          # None: judged by heartbeats alone
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
        self.spark_conf = dict(spark_conf or {})    # --spark-conf: defaults under each job's env
        self.children: dict[int, subprocess.Popen] = {}     # attempt_id -> driver process
        self._reported_end: dict[int, float] = {}             # attempt_id -> when we saw its end
        self._stop = threading.Event()
        self._wake = threading.Event()
        # Our liveness lock as last seen (``lock_regain.py``): drivers are launched only while it
        # is shown held; one that can be lost (PostgreSQL's) is watched, and fenced.
        self._regain = LockRegain(self.timeouts, watched=liveness is not None and liveness.can_lose_held)
        self._killed_for_outage: set[int] = set()     # attempts whose drivers that kill ended
        self._beating: threading.Thread | None = None
        self._stepped_at = clock.monotonic()     # the loop's last step: the heartbeat's proof of progress
        self._spark_confs: dict[tuple[str, str], dict | None] = {}   # (config, variables) -> conf
        # warm_drivers: idle drivers kept started (0: every attempt starts a cold one)
        self.warm_pool = WarmPool(warm_drivers, warm_command(
            store_url, self.timeouts.driver_heartbeat_interval, self.timeouts.driver_self_fence_after),
            self._driver_env(None, worker_conf=False), self.timeouts.warm_refill_hold)

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> None:
        """The worker loop; drivers die with the thread that runs it, so keep it long-lived."""
        self._regain.seen_held(self._take_liveness_lock())
        self._step_on_new_session(self.register, "registering")
        self.start_heartbeat()
        self.start_liveness_watch()      # threads of their own: a busy or blocked loop must not delay them
        # PostgreSQL: woken the moment the leader assigns us an attempt (store/wakeups.py).
        listener = None if self.store.is_sqlite else AssignmentListener(
            self.store_url, self.node_id, self._wake.set).start()
        try:
            self._loop()
        finally:
            if listener is not None:
                listener.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._step_on_new_session(self.step, "its step")
                self.warm_pool.refill()      # in this thread: warm drivers die with it too
            except Exception:
                log.exception("worker step failed")
            self._wake.wait(self.poll)
            self._wake.clear()
        self._shutdown()
        if self.liveness is not None:    # we stopped (and said so): nothing to watch any more
            self.liveness.release(worker_lock(self.node_id))

    def _step_on_new_session(self, step, what: str):
        """A step whose store session the server ended is taken again on a new session at once
        (store/sessions.py), not after a poll and a traceback: each step reads what is to be
        done afresh, and every write in it is a compare-and-set or idempotent."""
        return again_on_new_session(step, what=f"worker {self.node_id}: {what}",
                                    within=self.timeouts.worker_heartbeat_interval, holds=lambda: not self._stop.is_set())

    def wake(self) -> None:
        """Look for work now (local mode: the embedded coordinator just assigned an attempt)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _shutdown(self) -> None:
        """Drivers of ended jobs may finish reporting their end; the others die now."""
        self.stop_heartbeat()      # its last beat must not land after "stopped" below
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

    def register(self) -> None:
        register_node(self.store, self.node_id, "worker", slots=self.slots, liveness=self.liveness is not None)
        self._end_orphans()

    def _end_orphans(self) -> None:
        """Attempts an earlier process of this worker launched end now, as failed.

        Their drivers died with that process (``PR_SET_PDEATHSIG``), or are put down here;
        nobody else would ever record their exit, and a job waits for that before it retries.
        """
        from seatide.coordinator.service import kill_if_reachable

        with self.store.read() as conn:
            orphans = conn.execute(select(s.attempts).where(and_(
                s.attempts.c.worker_id == self.node_id, s.attempts.c.ended_at.is_(None),
                s.attempts.c.state != AttemptState.ASSIGNED))).all()
        for attempt in orphans:
            kill_if_reachable(attempt, self.store_url)
            log.warning("attempt %s of job %s was launched by an earlier process of this worker: ended",
                        attempt.attempt_id, attempt.job_id)
            self.record_exit(attempt.attempt_id, None,
                             error="its worker restarted; the driver ended with the worker's earlier process")

    # -- one pass ----------------------------------------------------------------------------
    def step(self) -> None:
        self._stepped_at = clock.monotonic()
        with self.store.read() as conn:
            mine = conn.execute(select(s.attempts).where(and_(
                s.attempts.c.worker_id == self.node_id, s.attempts.c.ended_at.is_(None)))).all()
        for attempt in mine:
            if attempt.state == AttemptState.LAUNCHING and attempt.attempt_id not in self.children:
                # Claimed by an earlier step of ours that started no driver, and not ended then:
                # the store went away on the way (launch.py). Only this loop launches, so none is
                # mid-launch now.
                self.record_exit(attempt.attempt_id, None, error=UNLAUNCHED, store_outage=True)
            elif attempt.state == AttemptState.ASSIGNED:
                self._launch(attempt)
                self._stepped_at = clock.monotonic()     # hundreds of launches make one step
            elif attempt.kill_requested:
                self._kill(attempt)
            elif attempt.state not in ATTEMPT_LIVE:
                self._await_exit(attempt)
        for attempt_id, proc in list(self.children.items()):
            if proc.poll() is not None:
                self.record_exit(attempt_id, proc.returncode)

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
        elif proc is None and attempt.state not in ATTEMPT_LIVE:
            # Not our child (we restarted) or already gone: nothing to reap, record it. A
            # pid never recorded means the launch was cut short: no driver to put down.
            from seatide.coordinator.service import kill_if_reachable
            kill_if_reachable(attempt, self.store_url)
            self.record_exit(attempt.attempt_id, None)

    def record_exit(self, attempt_id: int, code: int | None, error: str | None = None,
                    store_outage: bool = False) -> None:
        """The driver process is gone: record it, and fail the attempt if it ended silently.

        A live attempt whose driver fenced itself off (the store was out of reach for its
        self-fence), or that we killed because our lock's store session ended, ended by the
        store's absence: its retry is not charged to the job."""
        store_outage = store_outage or attempt_id in self._killed_for_outage
        if store_outage and error is None:
            error = OUTAGE_KILL
        with self.store.write() as conn:
            query = select(s.attempts).where(s.attempts.c.attempt_id == attempt_id)
            # Two threads may record the same exit (the loop and the liveness watch): once.
            attempt = conn.execute(query if self.store.is_sqlite else query.with_for_update()).first()
            if attempt is not None and attempt.ended_at is None:
                values: dict = {"ended_at": store_now(conn), "exit_code": code}
                if attempt.state in ATTEMPT_LIVE:
                    values.update(state=AttemptState.FAILED, error=attempt.error or error or _exit_message(code))
                    if store_outage or code == FENCED_EXIT_CODE:
                        values["charged"] = False
                conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == attempt_id).values(**values))
                record_event(conn, "DRIVER_EXITED", f"worker:{self.node_id}", attempt.job_id, attempt.incarnation,
                             attempt=attempt_id, exit_code=code,
                             run_id=run_of_incarnation(attempt.job_id, attempt.incarnation))
            elif attempt is None:
                log.info("driver of attempt %s exited (code %s) after its job was cleaned up; nothing to record",
                         attempt_id, code)
        # Forgotten only once recorded: a write that failed (the store away) is made again.
        self.children.pop(attempt_id, None)
        LOG_MASKING.drop((self.node_id, attempt_id))
        self._reported_end.pop(attempt_id, None)
        self._killed_for_outage.discard(attempt_id)


def _exit_message(code: int | None) -> str:
    if code is not None and code < 0:
        return f"driver process killed by signal {signal.Signals(-code).name}"
    return f"driver process exited with code {code} before reporting its end"


