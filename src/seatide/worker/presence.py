"""How a worker shows the leader it is alive: its liveness lock (PostgreSQL), held for its life
and taken again after a store outage (its drivers kept when it is back in time, ``lock_regain.py``,
else killed first), and its heartbeat, from a thread of its own, which stops when the loop is stuck.

A mixin of ``Worker``, apart from the loop that launches and supervises drivers (``agent.py``):
the two meet only in ``LockRegain.mutex`` (a driver started is a child the fence sees, and every
move of the lock's state is made under it; never held across I/O),
``_stepped_at`` (the loop's proof of progress) and ``record_exit``.
"""

from __future__ import annotations

import logging
import threading

from seatide import clock
from seatide.coordinator.service import node_heartbeat, register_node
from seatide.store.liveness import worker_lock
from seatide.timeouts import LIVENESS_CHECK_S, LIVENESS_TAKE_WITHIN_S
from seatide.worker.lock_regain import LockState

log = logging.getLogger(__name__)

# How often a worker tries to take back a lost lock, and checks its drivers' deadline meanwhile.
LOST_LOCK_RETRY_S = 0.05


class WorkerRefused(Exception):
    """The worker cannot start; the message says why and what to do."""


class Presence:
    def _take_liveness_lock(self) -> float:
        """Take our lock, retrying for ``LIVENESS_TAKE_WITHIN_S``; the moment the try that took
        it was asked."""
        if self.liveness is None:
            return clock.monotonic()
        deadline = clock.monotonic() + LIVENESS_TAKE_WITHIN_S
        while True:
            asked = clock.monotonic()
            if self.liveness.hold(worker_lock(self.node_id)):
                return asked
            if clock.monotonic() >= deadline:
                raise WorkerRefused(f"another worker with node id {self.node_id!r} is running on this store (it "
                                    f"holds the worker's liveness lock); stop it, or give this one another "
                                    f"--node-id")
            self._stop.wait(0.05)

    def start_liveness_watch(self) -> None:
        """Before the loop launches anything, while the lock can be lost (``LockRegain.watched``):
        the lock shown held once more (registering may have been slow), then the fence's thread,
        then the watch's, each its own: a check that blocks never holds up the fence."""
        if not self._regain.watched:
            return
        asked = clock.monotonic()
        held = self.liveness.holds(worker_lock(self.node_id))
        with self._regain.mutex:
            if held:
                self._regain.seen_held(asked)
            else:
                self._regain.seen_gone()     # the watch takes it back, or the fence kills what it must
        threading.Thread(target=self._fence_lost_lock, name="liveness-fence", daemon=True).start()
        threading.Thread(target=self._watch_liveness_lock, name="liveness-watch", daemon=True).start()

    def _watch_liveness_lock(self) -> None:
        """A check asked every ``check_every`` while the lock is held (counted from the last one
        asked, as the window is: a slow answer does not push the next one back), every
        ``LOST_LOCK_RETRY_S`` while it is away, every ``LIVENESS_CHECK_S`` once the drivers are
        fenced (nothing left to save: a recovering server is not flooded with connections)."""
        asked = clock.monotonic()
        while not self._stop.wait(max(0.0, asked + self._next_check_in() - clock.monotonic())):
            asked = clock.monotonic()
            try:
                self.check_liveness_lock()
            except Exception as exc:     # the store is still away: try again at the next check
                log.warning("worker %s: its liveness lock is not back yet: %s", self.node_id, exc)

    def _next_check_in(self) -> float:
        state = self._regain.state
        if state is LockState.HELD:
            return self._regain.check_every()
        return LOST_LOCK_RETRY_S if state is LockState.AWAY else LIVENESS_CHECK_S

    def check_liveness_lock(self) -> None:
        """Our lock is gone while we live (its PostgreSQL session ended: a server restart, a
        failover, ``pg_terminate_backend``). The leader takes a lock that stays free, without a
        heartbeat from us, for ``Timeouts.lock_death_confirm_after`` as our death and replaces
        our drivers. They live on if the lock is back, with a heartbeat, before that window
        could close; otherwise they die, a margin before it (fail-stop), and no driver is
        launched until we hold the lock again and have registered afresh (``lock_regain.py``)."""
        if self.liveness is None:
            return
        regain = self._regain
        if regain.state is LockState.HELD:
            asked = clock.monotonic()
            held = self.liveness.holds(worker_lock(self.node_id))
            with regain.mutex:
                if held and regain.seen_held(asked):
                    return
                if not held:
                    regain.seen_gone()
            if regain.state is LockState.AWAY:
                log.warning("worker %s lost its liveness lock: taking it back (%d driver(s) running)",
                            self.node_id, len(self.children))
        if regain.state is LockState.AWAY:
            kept = self._drivers_kept()
            if kept is None and not regain.must_fence(clock.monotonic()):
                return             # the store did not answer: try again at the next check
            if kept:
                return             # the lock is back in time: the drivers live on
            self._fence("its liveness lock is not back in time")
        for attempt_id, proc in list(self.children.items()):
            proc.wait()
            # Needs the store: retried until it is back. Those the fence killed are the outage's
            # (not charged); one that had exited by itself before (a crash) is its own.
            self.record_exit(attempt_id, proc.returncode)
        self._take_liveness_lock()
        register_node(self.store, self.node_id, "worker", slots=self.slots, liveness=True)
        asked = clock.monotonic()          # shown held after registering, which may have been slow
        if not self.liveness.holds(worker_lock(self.node_id)):
            raise ConnectionError("its liveness lock was lost again while it registered")
        with regain.mutex:
            regain.taken_again(asked)
        log.info("worker %s holds its liveness lock again", self.node_id)

    def _drivers_kept(self) -> bool | None:
        """One try to take the lock back with the drivers alive: True if it is back and our
        heartbeat landed in time (they live on), False if they must die now, None if the store
        did not answer (try again, until ``LockRegain.kill_by``)."""
        try:
            asked = clock.monotonic()
            if not self.children:
                return False       # nothing to keep
            if not self.liveness.hold(worker_lock(self.node_id)):
                return None        # our old session not gone yet (or a worker with our node id): until the window ends
            node_heartbeat(self.store, self.node_id)
        except Exception as exc:
            log.warning("worker %s: its liveness lock is not back yet: %s", self.node_id, exc)
            return None
        with self._regain.mutex:
            # Landed in time, and not fenced meanwhile (a lock shown back then comes too late).
            if clock.monotonic() > self._regain.kill_by() or not self._regain.seen_held(asked):
                return False
        log.warning("worker %s holds its liveness lock again and heartbeated in time: its %d driver(s) live on",
                    self.node_id, len(self.children))
        return True

    def _fence(self, why: str, only_if_due: bool = False) -> None:
        """Kill our drivers (once): ``only_if_due``, only if their window has ended with the lock
        not shown held (a check may have shown it while we waited for the mutex)."""
        regain = self._regain
        with regain.mutex:
            if regain.state is LockState.FENCED or (only_if_due and not regain.must_fence(clock.monotonic())):
                return
            regain.fenced(clock.monotonic())
            for attempt_id, proc in list(self.children.items()):
                if proc.poll() is None:
                    self._killed_for_outage.add(attempt_id)
                    proc.kill()
            self.warm_pool.kill_handing()     # being handed an attempt: not yet among the children
        log.error("worker %s: %s: killed its %d driver(s); registering again", self.node_id, why,
                  len(self.children))

    def _fence_lost_lock(self) -> None:
        """Its own thread: the drivers die once ``LockRegain.kill_by`` passes with the lock not
        shown held, however long a check or a try to take it back blocks (a connection
        black-holed by a failover answers nothing for minutes)."""
        while not self._stop.is_set():
            try:
                left = self.fence_if_due()
            except Exception:           # never silently gone: the drivers' deadline is this thread
                log.exception("worker %s: the liveness fence failed; looking again", self.node_id)
                left = 0.0
            self._stop.wait(min(LIVENESS_CHECK_S, left) if left > 0 else LOST_LOCK_RETRY_S)

    def fence_if_due(self) -> float:
        """One look of the fence thread (the simulation takes it as a step): kill the drivers if
        their window ended with the lock not shown held; the seconds left of the window."""
        now = clock.monotonic()
        if self._regain.must_fence(now):
            self._fence("its liveness lock was not shown held in time", only_if_due=True)
        return self._regain.kill_by() - now

    def start_heartbeat(self) -> None:
        """Heartbeat from a thread of its own, every ``worker_heartbeat_interval`` until stopped.

        Not from the loop: a launch can take seconds on a loaded machine (the first job text
        parsed, a slow fork, a step starting hundreds of drivers), and a worker silent that long
        is declared lost and its attempts replaced while it is alive and launching them.

        But a heartbeat says the worker will act on what it is assigned, so it pauses while its
        drivers are fenced (``lock_regain.py``), and stops when the loop has made no step for
        ``--launch-timeout``: the leader has given up on any launch that slow anyway, and a
        worker stuck for good is then declared lost and its drivers replaced, as one that died."""
        self._beating = threading.Thread(target=self._beat_until_stopped, name="heartbeat", daemon=True)
        self._beating.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._beating is not None:
            self._beating.join()

    def _beat_until_stopped(self) -> None:
        interval = self.timeouts.worker_heartbeat_interval
        silent = False
        while not self._stop.is_set():
            stuck_for = clock.monotonic() - self._stepped_at
            if stuck_for > self.timeouts.launch:
                if not silent:
                    log.error("worker %s: its loop has made no step for %.0f s (--launch-timeout %.0f s): "
                              "heartbeats stop, so the leader replaces its drivers", self.node_id, stuck_for,
                              self.timeouts.launch)
                silent = True
                self._stop.wait(interval)
                continue
            silent = False
            if self._regain.state is LockState.FENCED:
                # Its drivers were killed and it launches none until it holds its lock again and
                # has registered (which beats): a worker kept fenced (a lock session the server
                # keeps for minutes) falls silent, so the leader places new work elsewhere.
                self._stop.wait(min(interval, self.poll))
                continue
            try:
                node_heartbeat(self.store, self.node_id)
                self._stop.wait(interval)
            except Exception as exc:     # the store is away: try again soon, as the loop does
                log.warning("worker %s: heartbeat failed: %s", self.node_id, exc)
                self._stop.wait(min(interval, self.poll))
