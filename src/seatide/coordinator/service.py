"""A coordinator: competes for the lease; while it leads, reconciles every job each tick.

The loop is the whole of leadership: take or renew the lease, read the store, decide
per job (``reconcile_job``), apply the decisions fenced by epoch, run due cleanups.
A new leader after a failover does nothing different from the old one.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from itertools import chain
from typing import Iterator

from sqlalchemy import and_, func, insert, select, update

from seatide import clock
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.coordinator.effects import Applier
from seatide.coordinator.lease import LeaderLease
from seatide.coordinator.lock_death import LockDeathWatch
from seatide.coordinator.stamp_watch import StampWatch
from seatide.coordinator.release import Releaser, due_releases
from seatide.coordinator.source_watch import SourceWatch, WatchRules
from seatide.coordinator.retention import Pruner, RetentionRules
from seatide.coordinator.reconcile_errors import tell_reconcile_error
from seatide.coordinator.reconcile import CreateAttempt, Snapshot, Timeouts, reconcile_job
from seatide.coordinator.worker_wait import WorkerWait
from seatide.store import schema as s
from seatide.store.clock import read_store_now, store_now
from seatide.store.db import NotLeader, Store, normalize_url
from seatide.store.liveness import Liveness
from seatide.store.node_features import FEATURES, store_revision
from seatide.store.sessions import again_on_new_session, session_ended
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, AttemptState

log = logging.getLogger(__name__)

# A job whose reconcile step raised is retried after this, doubling per failure.
RECONCILE_BACKOFF_S = 0.5
RECONCILE_BACKOFF_MAX_S = 60.0
# What a decision reads of a job: everything but its config text, variables and outline.
SNAPSHOT_JOB_COLUMNS = [c for c in s.jobs.c if c.name not in ("config", "variables", "outline")]


def register_node(store: Store, node_id: str, role: str, url: str | None = None, slots: int = 0,
                  liveness: bool = False) -> None:
    """liveness: the node holds its liveness lock (taken before this call) for its life. The row says what this
    version can do (``store/node_features.py``): what an older process's row does not say."""
    with store.write() as conn:
        now = read_store_now(conn)      # heartbeats are judged by the store's clock
        values = dict(role=role, host=socket.gethostname(), pid=os.getpid(), url=url, slots=slots,
                      started_at=now, heartbeat_at=now, stopped=False, liveness=liveness, features=FEATURES)
        if conn.execute(update(s.nodes).where(s.nodes.c.node_id == node_id).values(**values)).rowcount == 0:
            conn.execute(insert(s.nodes).values(node_id=node_id, **values))


def node_heartbeat(store: Store, node_id: str, stopped: bool = False) -> None:
    with store.write() as conn:
        conn.execute(update(s.nodes).where(s.nodes.c.node_id == node_id)
                     .values(heartbeat_at=store_now(conn), stopped=stopped))


def kill_if_reachable(attempt, store_url: str) -> bool:
    """SIGKILL a driver on this host, after checking the pid still is that driver.

    The pid must run ``seatide.runtime.driver`` for this store, job and attempt: a pid
    reused by another process, or a driver of another SeaTide installation on the same
    host (attempt ids are only unique within one store), is never touched.
    """
    if attempt.pid is None:
        return False
    try:
        with open(f"/proc/{attempt.pid}/cmdline", "rb") as handle:
            argv = [arg.decode(errors="replace") for arg in handle.read().split(b"\0")]
    except OSError:
        return False
    if not is_driver_of(argv, store_url, attempt.job_id, attempt.attempt_id):
        return False
    try:
        os.kill(attempt.pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def is_driver_of(argv: list[str], store_url: str, job_id: str, attempt_id: int) -> bool:
    """Whether a command line is the driver of this attempt (see worker/agent.py's launch)."""
    if "seatide.runtime.driver" not in argv:
        return False

    def value(flag: str) -> str | None:
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else None

    store = value("--store")
    return (store is not None and normalize_url(store) == normalize_url(store_url)
            and value("--job-id") == job_id and value("--attempt") == str(attempt_id))


def _watch_rules() -> WatchRules:
    """From the environment; a bad value there is a warning, not a coordinator that does not start
    (``seatide cluster coordinator`` refuses it instead, before starting)."""
    try:
        return WatchRules.from_environment()
    except ValueError as exc:
        log.warning("%s; using the defaults", exc)
        return WatchRules()


class Coordinator:
    def __init__(self, store: Store, node_id: str | None = None, url: str | None = None,
                 timeouts: Timeouts = Timeouts(), history_expire_s: float = 1440 * 60, tick: float = 0.25,
                 data_dir: str | None = None, retention: RetentionRules = RetentionRules(),
                 liveness: Liveness | None = None, watch: WatchRules | None = None):
        self.store = store
        self.node_id = node_id or f"coordinator-{socket.gethostname()}-{os.getpid()}"
        self.url = url
        self.timeouts = timeouts.check()
        # Liveness locks (store/liveness.py): a dead leader or worker is seen at once. None:
        # by lease and heartbeat timeouts only (the simulation; SEATIDE_LIVENESS_LOCKS=0).
        self.liveness = liveness
        self.lease = LeaderLease(store, self.node_id, url, timeouts, liveness)
        self.tick = tick
        self.applier = Applier(store, self.node_id, history_expire_s)
        # data_dir: where set-aside checkpoint directories and attempt logs are pruned (None: rows only)
        self.pruner = Pruner(store, data_dir, retention)
        self.releaser = Releaser(store, self.applier.actor)
        self.worker_wait = WorkerWait(store, self.applier.actor, self.timeouts)   # says why jobs wait for a worker
        # What CDC sources hold on their servers, measured while this coordinator leads (a thread
        # of its own: a database that does not answer never holds a tick).
        self.source_watch = SourceWatch(store, lambda: self.lease.epoch if self.lease.is_leader else None,
                                        self.applier.actor, watch or _watch_rules())
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.on_effects = None           # called after a tick that changed something (local mode wakes its worker)
        self.observe_tick = lambda seconds: None   # how long each reconcile pass took (metrics)
        self._thread = threading.Thread(target=self._loop, name="coordinator", daemon=True)
        self._host = socket.gethostname()
        self._backoff: dict[str, tuple[int, float]] = {}   # job id -> (failures in a row, retry at)
        self._last_beat = 0.0                               # when this node last heartbeated (its clock)
        # Observations, not facts: a new leader (or this one after a gap) starts them afresh,
        # which only makes it wait longer before it replaces anything.
        self.lock_deaths = LockDeathWatch(self.timeouts.lock_death_confirm_after)
        self.stamps = StampWatch()
        self._watching_epoch: int | None = None             # the term the two watches above were kept in
        self._observing_since: float | None = None          # store time since which it reached the store without a gap

    def start(self) -> "Coordinator":
        register_node(self.store, self.node_id, "coordinator", self.url)
        self._thread.start()
        self.source_watch.start()
        return self

    def wake(self) -> None:
        """Reconcile now rather than at the next tick (something was just written)."""
        self._wake.set()

    def stop(self, resign: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.source_watch.stop()
        if resign:
            try:
                self.lease.resign()
                node_heartbeat(self.store, self.node_id, stopped=True)
            except Exception as exc:
                log.warning("could not resign cleanly: %s", exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = clock.now()
            try:
                # A tick whose store session the server ended is taken again on a new session
                # at once (store/sessions.py): it decides afresh from a new snapshot, and every
                # write in it is fenced by the epoch, which stops it once the lease is gone.
                again_on_new_session(lambda: self._tick(started), what="the coordinator's tick",
                                     within=self.timeouts.lease_ttl, holds=lambda: not self._stop.is_set())
            except NotLeader:
                log.info("fenced: another coordinator leads now")
            except Exception:
                log.exception("reconcile tick failed")
                self.store_gap()
            self.lease.step("waiting for the next tick")
            self._wake.wait(max(0.0, self.tick - (clock.now() - started)))
            self._wake.clear()

    def _tick(self, started: float) -> None:
        if started - self._last_beat >= self.timeouts.worker_heartbeat_interval:
            self.lease.step("the node heartbeat")
            node_heartbeat(self.store, self.node_id)
            self._last_beat = started
        self.lease.step("the lease tick")
        leading = self.lease.tick()
        if self.lease.blind:
            self.lease.blind = False
            self.store_gap()
        if leading:
            self._reconcile_timed()

    def store_gap(self) -> None:
        """The store could not be reached (or this coordinator was cut off): heartbeats and
        checkpoints missed meanwhile are not counted against anyone (``reconcile.age``), nor a
        lock seen free before the gap (its 2 s of confirmation start again after it)."""
        self._observing_since = None
        self.lock_deaths.forget()
        self.stamps.forget()

    def _reconcile_timed(self) -> None:
        began = time.perf_counter()
        try:
            self.reconcile_all()
        finally:     # a pass cut short (fenced, store error) took time too
            self.observe_tick(time.perf_counter() - began)

    def reconcile_all(self) -> None:
        for _ in self.reconcile_steps():
            pass

    def reconcile_steps(self) -> Iterator[None]:
        """One reconcile pass, yielding after the snapshot and after each job and cleanup step:
        the simulation runs other processes between them, as threads and hosts would."""
        epoch = self.lease.epoch
        if epoch is None:
            return
        if epoch != self._watching_epoch:
            # A new term: what it saw before was not watched meanwhile (another coordinator
            # led), so its free locks and heartbeat stamps count from now, as a new leader's do.
            self.lock_deaths.forget()
            self.stamps.forget()
            self._watching_epoch = epoch
        self.lease.step("reading the snapshot")
        with self.store.read() as conn:
            # The leader compares heartbeats (stamped by the store) with the store's time,
            # not its own: a leader whose clock is off does not declare live workers lost.
            local_now = clock.monotonic()      # just before the store's: both times of the same moment
            now = read_store_now(conn)
        if self._observing_since is None:
            self._observing_since = now
        snaps, load = self._snapshots(now, local_now)
        for snap in snaps:
            yield
            if not self.lease.renew_if_due():     # a long pass keeps its lease (same epoch) or stops
                return
            if self._backoff.get(snap.job.job_id, (0, 0.0))[1] > now:
                continue
            self.lease.step("deciding a job")
            try:
                self._reconcile_one(epoch, snap, load)
            except NotLeader:
                raise
            except Exception as exc:
                if session_ended(exc):     # not the job's fault: the whole tick is taken again
                    raise
                self._isolate(epoch, snap.job, exc, now)
            else:
                self._backoff.pop(snap.job.job_id, None)
        # Every step renews when due, the cleanups' and pruning's too: only the per-job loop did,
        # and a pass that spent a lease ttl past it (a thousand jobs' pruning, a slow cleanup)
        # lost the lease. A step that does not return still loses it: renewal is the loop's.
        if not self.lease.renew_if_due():
            return
        self.lease.step("reading due cleanups")
        for result in due_results(self.store, now):
            yield
            if not self.lease.renew_if_due():
                return
            self.lease.step("a cleanup step")
            reconcile_cleanup(self.store, epoch, self.applier.actor, result,
                              lambda attempt: kill_if_reachable(attempt, self.store.url), self.applier.history_expire_s)
        if not self.lease.renew_if_due():
            return
        self.lease.step("reading due releases")
        for job in due_releases(self.store):
            yield
            if not self.lease.renew_if_due():
                return
            self.lease.step("a release step")
            self.releaser.step(epoch, job, now)
        if self.lease.renew_if_due():
            self.lease.step("retention pruning")
            self._prune(epoch, now)

    def _prune(self, epoch: int, now: float) -> None:
        try:
            self.pruner.maybe_run(epoch, now, self.lease.renew_if_due)
        except NotLeader:
            raise
        except Exception:     # retention is housekeeping: it must never stop the reconcile loop
            log.exception("retention pruning failed; retrying at its next run")
            self.pruner.next_at = now + self.pruner.rules.every_s

    def _reconcile_one(self, epoch: int, snap: Snapshot, load: dict[str, int]) -> None:
        actions = reconcile_job(snap, self.timeouts)
        if not actions:
            self.worker_wait.see(epoch, snap)
            return
        log.info("job %s: %s", snap.job.job_id, actions)
        for attempt in self.applier.apply(epoch, snap, actions):
            self._kill_unless_worker_can(attempt, snap)
        for action in actions:
            # The tick's later decisions see this worker's new attempt: no over-assignment.
            if isinstance(action, CreateAttempt):
                load[action.worker_id] = load.get(action.worker_id, 0) + 1
        self._wake.set()           # one step at a time: take the next one at once
        if self.on_effects is not None:
            self.on_effects()

    def _isolate(self, epoch: int, job, exc: Exception, now: float) -> None:
        """One job's failure (an illegal transition, a bad row) must not stop the tick for the
        others: record it, and back off this job alone (doubling, up to a minute)."""
        failures, _ = self._backoff.get(job.job_id, (0, 0.0))
        delay = min(RECONCILE_BACKOFF_MAX_S, RECONCILE_BACKOFF_S * 2 ** failures)
        self._backoff[job.job_id] = (failures + 1, now + delay)
        tell_reconcile_error(self.store, epoch, self.applier.actor, job, exc, delay)     # masked

    def _kill_unless_worker_can(self, attempt, snap: Snapshot) -> None:
        # A live worker kills its own drivers; a lost one cannot, so kill if it is on this host.
        node = snap.workers.get(attempt.worker_id)
        if node is not None and node.host == self._host:
            kill_if_reachable(attempt, self.store.url)

    def _snapshots(self, now: float, local_now: float) -> tuple[list[Snapshot], dict[str, int]]:
        """Every job the leader must look at, read in a fixed number of indexed queries
        (never one per job, never the jobs' config text).

        Each query names the jobs by the same condition (joined), not by a list of their ids:
        a thousand bound ids cost more to render and parse than the rows cost to read.
        ``local_now``: this process's monotonic clock read just before ``now`` was."""
        j, a, p = s.jobs.c, s.attempts.c, s.pipelines.c
        live_attempt = a.state.in_(sorted(ATTEMPT_LIVE))
        # Not ended, or ended with a driver that may still run (to put it down).
        active = j.status.notin_(sorted(JOB_TERMINAL)) | j.job_id.in_(select(a.job_id).where(live_attempt))
        with self.store.snapshot() as conn:
            workers = {n.node_id: n for n in conn.execute(select(s.nodes).where(s.nodes.c.role == "worker"))}
            revision = store_revision(conn)
            load: dict[str, int] = {}
            for row in conn.execute(select(a.worker_id, func.count()).where(live_attempt).group_by(a.worker_id)):
                load[row.worker_id] = row[1]
            jobs = conn.execute(select(*SNAPSHOT_JOB_COLUMNS).where(active).order_by(j.created_at)).all()
            if not jobs:       # nothing to judge: neither watch is kept, so both start again
                self.stamps.forget()
                self.lock_deaths.forget()
                return [], load
            # .all(): one fetch of every row; iterating fetches them one call each (psycopg)
            attempts = {row.attempt_id: row for row in conn.execute(
                select(s.attempts).join(s.jobs, j.current_attempt == a.attempt_id).where(active)).all()}
            pipelines: dict[tuple[str, int], list] = {}
            for row in conn.execute(select(s.pipelines).join(s.jobs, j.job_id == p.job_id).where(active)
                                    .order_by(p.pipeline_id)).all():
                pipelines.setdefault((row.job_id, row.incarnation), []).append(row)
            # Drivers launched for a job and never reaped, other than its current attempt's (by the
            # job's attempts index): a new driver waits for them (reconcile.attempt_gone).
            earlier: dict[str, list] = {}
            for row in conn.execute(select(s.attempts).join(s.jobs, j.job_id == a.job_id).where(and_(
                    active, a.ended_at.is_(None), a.attempt_id != func.coalesce(j.current_attempt, -1),
                    a.state != AttemptState.ASSIGNED))).all():
                earlier.setdefault(row.job_id, []).append(row)
        seen_from = self.stamps.seen_from(chain(
            (n.heartbeat_at for n in workers.values()), (j.updated_at for j in jobs),
            (stamp for row in chain(attempts.values(), *earlier.values())
             for stamp in (row.heartbeat_at, row.created_at, row.launched_at, row.progress_at)),
            (stamp for rows in pipelines.values() for p in rows
             for stamp in (p.started_at, p.last_checkpoint_at, p.progress_at))), now, local_now)
        dead = self._dead_workers(workers, now, seen_from)
        snaps = []
        for job in jobs:
            rows = pipelines.get((job.job_id, job.incarnation), [])
            # The newest completed checkpoint is on its pipeline's row (store/schema.py): no
            # checkpoint row is read, a seek per job once cost a quarter of the pass.
            last = max((r.last_checkpoint_at for r in rows if r.last_checkpoint_at is not None), default=None)
            snaps.append(Snapshot(job, attempts.get(job.current_attempt), rows, workers, load, now, last, dead,
                                  tuple(earlier.get(job.job_id, ())), self._observing_since, revision, seen_from))
        return snaps, load

    def _dead_workers(self, workers: dict, now: float, seen_from: dict | None = None) -> dict[str, float]:
        """Workers dead by their liveness lock (``LockDeathWatch.dead_among``)."""
        if self.liveness is None:
            return {}
        return self.lock_deaths.dead_among(self.liveness, workers, now, self._observing_since or 0.0, seen_from,
                                           self.timeouts.worker_lost_after)
