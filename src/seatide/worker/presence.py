"""How a worker shows the leader it is alive: its liveness lock (PostgreSQL), held for its life
and taken again after a store outage (its drivers kept when it is back in time, ``lock_regain.py``,
else killed first), and its heartbeat, from a thread of its own, which stops when the loop is stuck.

A mixin of ``Worker``, apart from the loop that launches and supervises drivers (``agent.py``):
the two meet only in ``_launching`` (a launch and the outage's kill sweep are exclusive),
``_stepped_at`` (the loop's proof of progress) and ``record_exit``.
"""

from __future__ import annotations

import logging
import threading

from seatide import clock
from seatide.coordinator.service import node_heartbeat, register_node
from seatide.store.liveness import worker_lock
from seatide.timeouts import LIVENESS_CHECK_S, LIVENESS_TAKE_WITHIN_S

log = logging.getLogger(__name__)

# How often a worker tries to take back a lost lock, and checks its drivers' deadline meanwhile.
LOST_LOCK_RETRY_S = 0.05


class WorkerRefused(Exception):
    """The worker cannot start; the message says why and what to do."""


class Presence:
    def _take_liveness_lock(self) -> None:
        if self.liveness is None:
            return
        deadline = clock.monotonic() + LIVENESS_TAKE_WITHIN_S
        while True:
            sent = clock.monotonic()
            if self.liveness.hold(worker_lock(self.node_id)):
                self._regain.seen_held(sent)
                return
            if clock.monotonic() >= deadline:
                raise WorkerRefused(f"another worker with node id {self.node_id!r} is running on this store (it "
                                    f"holds the worker's liveness lock); stop it, or give this one another "
                                    f"--node-id")
            self._stop.wait(0.05)

    def _watch_liveness_lock(self) -> None:
        threading.Thread(target=self._fence_lost_lock, name="liveness-fence", daemon=True).start()
        # Every check while it is away: the drivers live only if it is back within the window.
        while not self._stop.wait(LOST_LOCK_RETRY_S if self._regain.lost else LIVENESS_CHECK_S):
            try:
                self.check_liveness_lock()
            except Exception as exc:     # the store is still away: try again at the next check
                log.warning("worker %s: its liveness lock is not back yet: %s", self.node_id, exc)

    def check_liveness_lock(self) -> None:
        """Our lock is gone while we live (its PostgreSQL session ended: a server restart, a
        failover, ``pg_terminate_backend``). The leader takes a lock that stays free, without a
        heartbeat from us, for ``Timeouts.lock_death_confirm_after`` as our death and replaces
        our drivers. They live on if the lock is back, with a heartbeat, before that window
        could close (``worker/lock_regain.py``); otherwise they die, a margin before it
        (fail-stop), and no driver is launched until we hold the lock again and have
        registered afresh."""
        if self.liveness is None:
            return
        regain = self._regain
        if not self._lock_lost:
            asked = clock.monotonic()
            if self.liveness.holds(worker_lock(self.node_id)):
                regain.seen_held(asked)
                return
            with self._launching:
                self._lock_lost = regain.lost = True
            log.warning("worker %s lost its liveness lock: taking it back (%d driver(s) running)", self.node_id,
                        len(self.children))
        if regain.lost:
            kept = self._drivers_kept()
            if kept is None and clock.monotonic() < regain.kill_by():
                return             # the store did not answer: try again at the next check
            if self._stop_keeping(kill=not kept):
                return             # the lock is back in time: the drivers live on
        for attempt_id, proc in list(self.children.items()):
            proc.wait()
            # Needs the store: retried until it is back. Not the job's failure: not charged.
            self.record_exit(attempt_id, proc.returncode, store_outage=True)
        self._take_liveness_lock()
        register_node(self.store, self.node_id, "worker", slots=self.slots, liveness=True)
        self._lock_lost = False
        log.info("worker %s holds its liveness lock again", self.node_id)

    def _drivers_kept(self) -> bool | None:
        """One try to take the lock back with the drivers alive: True if it is back and our
        heartbeat landed in time (they may live on), False if they must die now, None if the
        store did not answer (try again, until ``LockRegain.kill_by``)."""
        try:
            if not self.children or not self.liveness.hold(worker_lock(self.node_id)):
                return False       # nothing to keep, or another worker with our node id took it
            node_heartbeat(self.store, self.node_id)
        except Exception as exc:
            log.warning("worker %s: its liveness lock is not back yet: %s", self.node_id, exc)
            return None
        return clock.monotonic() <= self._regain.kill_by()

    def _stop_keeping(self, kill: bool) -> bool:
        """The drivers were kept while the lock was away: now they die (``kill``), or the lock is
        back in time and we launch again. True if they live on; False if they were killed, here
        or first by ``_fence_lost_lock`` (a lock shown back then comes too late for them)."""
        with self._launching:
            if not self._regain.lost:
                return False
            self._regain.lost = False
            if not kill:
                self._lock_lost = False
                log.warning("worker %s holds its liveness lock again and heartbeated in time: its %d driver(s) "
                            "live on", self.node_id, len(self.children))
                return True
            log.error("worker %s lost its liveness lock: killing its %d driver(s) and registering again",
                      self.node_id, len(self.children))
            for attempt_id, proc in list(self.children.items()):
                if proc.poll() is None:
                    self._killed_for_outage.add(attempt_id)
                    proc.kill()
            return False

    def _fence_lost_lock(self) -> None:
        """Its own thread: the drivers die once ``LockRegain.kill_by`` passes with the lock not
        back, however long a try to take it back blocks (a connect may wait seconds)."""
        while not self._stop.is_set():
            lost = self._regain.lost
            if lost and clock.monotonic() >= self._regain.kill_by():
                self._stop_keeping(kill=True)
            self._stop.wait(LOST_LOCK_RETRY_S if lost else LIVENESS_CHECK_S)

    def start_heartbeat(self) -> None:
        """Heartbeat from a thread of its own, every ``worker_heartbeat_interval`` until stopped.

        Not from the loop: a launch can take seconds on a loaded machine (the first job text
        parsed, a slow fork, a step starting hundreds of drivers), and a worker silent that long
        is declared lost and its attempts replaced while it is alive and launching them.

        But a heartbeat says the worker will act on what it is assigned, so it stops when the
        loop has made no step for ``--launch-timeout``: the leader has given up on any launch
        that slow anyway, and a worker stuck for good is then declared lost and its drivers
        replaced, as one that died."""
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
            try:
                node_heartbeat(self.store, self.node_id)
                self._stop.wait(interval)
            except Exception as exc:     # the store is away: try again soon, as the loop does
                log.warning("worker %s: heartbeat failed: %s", self.node_id, exc)
                self._stop.wait(min(interval, self.poll))
