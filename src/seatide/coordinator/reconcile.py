"""reconcile_job: the leader's decision for one job, as a pure function of stored state.

Reconciliation is level-based: it looks at what the store says now (the job's status
and desired state, its current attempt, its pipelines, the workers' heartbeats) and
returns the next idempotent steps, whatever event woke it and whichever process ran
it last. A leader that takes over after a failover runs exactly this; there is no
separate "restore" path. Effects are applied by ``effects.apply`` in one fenced
transaction per job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seatide.store.checkpoint_views import stale_window_opened
from seatide.store.node_features import HEAD, heads_store
from seatide.store.states import (ATTEMPT_LIVE, JOB_TERMINAL, PIPELINE_TERMINAL, AttemptState, Desired, JobStatus,
                                  PipelineStatus, final_job_status)
from seatide.timeouts import STARTUP_JUDGED_AFTER_S, Timeouts   # every timeout and its margins: seatide/timeouts.py


@dataclass
class Snapshot:
    job: Any
    attempt: Any | None
    pipelines: list[Any]
    workers: dict[str, Any]            # node_id -> node row (workers only)
    load: dict[str, int] = field(default_factory=dict)   # node_id -> live attempts
    now: float = 0.0
    # The newest completed checkpoint of this incarnation (the watchdog judges each pipeline by
    # its own row instead: a healthy pipeline must not hide a stuck one).
    last_checkpoint_at: float | None = None
    # Workers dead by their liveness lock (store/liveness.py), each with the store time its lock
    # was first seen free: free since then, for long enough, and no heartbeat from the worker
    # since (coordinator/service.py). Its drivers died with it, unless one of them heartbeated
    # after that time (``died_with_worker``).
    dead_workers: dict[str, float] = field(default_factory=dict)
    # The job's other attempts whose drivers were launched and not yet reaped (an incarnation a
    # resume superseded, a lost attempt being put down): no new driver starts beside them.
    earlier: tuple = ()
    # The store time from which this leader has watched the store without a gap: silence
    # before it (the store was down, or this coordinator cut off) is not counted against a
    # heartbeat, a checkpoint or a launch. 0: no gap to allow for.
    observed_since: float = 0.0
    # The store's revision, as read with the workers: a job goes only to a worker whose code heads it.
    store_revision: str = HEAD
    # Heartbeat stamp -> the store time from which this leader has seen it stand, by its own
    # monotonic clock (coordinator/stamp_watch.py): a silence is never counted longer than
    # that, so a step of the store host's clock does not make it long at once.
    seen_from: dict = field(default_factory=dict)


def age(snap: Snapshot, stamp: float | None) -> float:
    """Seconds since ``stamp`` (store time) that the leader could see: a blind spot (its own,
    or the store's restart) is no evidence that anything stopped."""
    return seen_silent(snap.now, stamp, snap.observed_since, snap.seen_from)


def seen_silent(now: float, stamp: float | None, observed_since: float, seen_from: dict | None = None) -> float:
    """``age`` from its parts, for the leader before it has a snapshot: it picks the workers whose
    liveness locks it reads by this, so a worker leaves that watch just when ``worker_alive``
    counts it lost by heartbeat, however long before this leader's first look it died."""
    return now - max(stamp or 0.0, observed_since, (seen_from or {}).get(stamp, 0.0))


def died_with_worker(attempt: Any, snap: Snapshot) -> bool:
    """The attempt's worker died (its lock), and the driver has not heartbeated since its lock
    was first seen free: a driver that beats after that outlived the lock, so the lock alone
    proves nothing about it."""
    free_since = snap.dead_workers.get(attempt.worker_id)
    return free_since is not None and (attempt.heartbeat_at or 0.0) < free_since


# -- effects (applied by effects.py) --------------------------------------------------------
@dataclass(frozen=True)
class SetStatus:
    status: JobStatus


@dataclass(frozen=True)
class CreateAttempt:
    worker_id: str


@dataclass(frozen=True)
class MarkAttemptLost:
    reason: str


@dataclass(frozen=True)
class FlagStale:
    seconds: float       # since the last checkpoint (or since the attempt started)
    policy: str
    pipelines: tuple = field(default=(), compare=False)    # the pipelines that long without one


@dataclass(frozen=True)
class FlagHung:
    seconds: float       # without a committed batch or a completed Spark task
    policy: str
    pipelines: tuple = field(default=(), compare=False)    # the pipelines that long without either


@dataclass(frozen=True)
class ScheduleRetry:
    at: float
    cause: str
    charged: bool = True      # counts against job.retry.times (not when the store was out of reach)


@dataclass(frozen=True)
class EndPipelines:
    status: PipelineStatus    # what every not-yet-ended pipeline becomes
    error: str | None = None


@dataclass(frozen=True)
class Finish:
    status: JobStatus
    error: str | None = None


# What ``reconcile_job`` may decide: effects.Applier handles each one, by a match on this union.
Action = (SetStatus | CreateAttempt | MarkAttemptLost | FlagStale | FlagHung | ScheduleRetry | EndPipelines
          | Finish)


def reconcile_job(snap: Snapshot, timeouts: Timeouts) -> list[Action]:
    job, attempt, now = snap.job, snap.attempt, snap.now
    live = attempt is not None and attempt.state in ATTEMPT_LIVE
    if job.status in JOB_TERMINAL:
        # Terminal is forever; only a leftover driver may still need putting down.
        if live and lost_reason(snap, timeouts):
            return [MarkAttemptLost("job already ended: " + lost_reason(snap, timeouts))]
        return []

    statuses = [p.status for p in snap.pipelines]
    if statuses and all(s in PIPELINE_TERMINAL for s in statuses):
        error = next((p.error for p in snap.pipelines if p.status == PipelineStatus.FAILED and p.error), None)
        return [Finish(final_job_status(statuses, job.desired == Desired.SAVEPOINT), error)]

    if live:
        return _while_attempt_lives(snap, timeouts)

    if attempt is not None and not process_gone(snap, timeouts):
        return []   # never start a driver while the previous one may still run
    if any(not attempt_gone(earlier, snap, timeouts) for earlier in snap.earlier):
        return []   # nor while any earlier one may (a resume does not wait for them itself)

    if job.desired == Desired.CANCEL:
        return [EndPipelines(PipelineStatus.CANCELED), Finish(JobStatus.CANCELED)]
    if job.desired == Desired.SAVEPOINT and attempt is not None:
        # The driver ended before it could stop cleanly: each pipeline's latest
        # completed checkpoint is a consistent point to resume from.
        # A job waiting for its retry (PENDING) passes through DOING_SAVEPOINT like any other.
        via = [] if job.status == JobStatus.DOING_SAVEPOINT else [SetStatus(JobStatus.DOING_SAVEPOINT)]
        return [*via, EndPipelines(PipelineStatus.SAVEPOINT_DONE), Finish(JobStatus.SAVEPOINT_DONE)]
    if attempt is not None and job.status not in (JobStatus.CREATED, JobStatus.PENDING):
        cause = attempt.error or f"attempt {attempt.attempt_id} ended {attempt.state}"
        # An attempt the store's absence ended (a restart of its server, a failover) is not the
        # job's failure: its retry is free, or a stream would run out of retries in a month.
        charged = getattr(attempt, "charged", True)
        if job.retries_used < job.max_retries or not charged:
            return [ScheduleRetry(now + retry_delay(snap, timeouts), cause, charged)]
        message = f"failed after {job.retries_used} retries: {cause}" if job.max_retries else cause
        return [EndPipelines(PipelineStatus.FAILED, message), Finish(JobStatus.FAILED, message)]
    if job.status == JobStatus.CREATED:
        return [SetStatus(JobStatus.PENDING)]
    if job.status == JobStatus.PENDING and now >= (job.next_attempt_at or 0.0):
        worker = choose_worker(snap, timeouts)
        if worker is not None:
            return [CreateAttempt(worker)]
    return []


def _while_attempt_lives(snap: Snapshot, timeouts: Timeouts) -> list:
    job, attempt, now = snap.job, snap.attempt, snap.now
    reason = lost_reason(snap, timeouts)
    if reason:
        return [MarkAttemptLost(reason)]
    if job.desired == Desired.CANCEL:
        if job.status != JobStatus.CANCELING:
            return [SetStatus(JobStatus.CANCELING)]
        if age(snap, job.updated_at) > timeouts.cancel_grace:
            return [MarkAttemptLost(f"driver did not stop within {timeouts.cancel_grace:.0f} s of the cancel")]
        return []
    if job.desired == Desired.SAVEPOINT and job.status not in (JobStatus.DOING_SAVEPOINT, JobStatus.CANCELING):
        return [SetStatus(JobStatus.DOING_SAVEPOINT)]
    if job.status == JobStatus.SCHEDULED and attempt.state == AttemptState.RUNNING:
        return [SetStatus(JobStatus.RUNNING)]
    if job.status == JobStatus.RUNNING and job.stale_since is None:
        stale = checkpoint_stale_for(snap)
        if stale is not None:
            return _on_stale(snap, *stale)
    if job.status == JobStatus.RUNNING and job.hung_since is None:
        hung = hung_for(snap)
        if hung is not None:
            seconds, stuck = hung
            return _on_hung(snap, seconds, f"pipeline {', '.join(map(str, stuck))} of attempt {attempt.attempt_id} "
                                           f"committed no batch and completed no Spark task for {seconds:.0f} s "
                                           f"({attempt.tasks_done or 0} tasks done by the attempt)", tuple(stuck))
        starting = stuck_starting_for(snap)
        if starting is not None:
            return _on_hung(snap, starting, f"attempt {attempt.attempt_id} had not started its pipelines "
                                            f"{starting:.0f} s after its launch (the driver's log names the "
                                            f"pipeline it waits for)")
    return []


def _window_opened(snap: Snapshot) -> float | None:
    """When this attempt's pipelines (re)started, while they have data pending; else None
    (``stale_window_opened``: the rule every view of checkpoint health follows too)."""
    return stale_window_opened(snap.attempt, snap.pipelines)


def _judged(snap: Snapshot, since) -> tuple[float, list[int]] | None:
    """The longest silence of a running pipeline with data pending, by ``since(pipeline)``, and
    the pipelines silent that long; None before the window opens.

    Each pipeline is judged by its own facts: the newest checkpoint of all of them would let a
    pipeline that keeps committing hide one whose sink hangs (issue 30, finding 10)."""
    opened = _window_opened(snap)
    if opened is None:
        return None
    ages = {p.pipeline_id: age(snap, max(since(p), opened)) for p in snap.pipelines
            if p.status == PipelineStatus.RUNNING and not p.idle}
    longest = max(ages.values())
    return longest, sorted(pipeline_id for pipeline_id, silent in ages.items() if silent == longest)


def checkpoint_stale_for(snap: Snapshot) -> tuple[float, list[int]] | None:
    """Seconds without a checkpoint of a pipeline with data pending, once past the job's
    window, and which pipelines."""
    if snap.job.stale_after_s is None:
        return None
    judged = _judged(snap, lambda p: p.last_checkpoint_at or 0.0)
    return judged if judged is not None and judged[0] > snap.job.stale_after_s else None


def hung_for(snap: Snapshot) -> tuple[float, list[int]] | None:
    """Seconds a pipeline has gone without a committed batch and without a completed Spark
    task of its own, once past ``job.progress-timeout``, and which pipelines: the driver
    heartbeats, but their work is stuck.

    The window opens at the attempt's first progress report, which its driver makes once
    every pipeline has started (``runtime/progress.py``): start-up is not a hang. A pipeline
    without task progress of its own (a driver from before revision 0013) is judged by the
    attempt's.
    """
    timeout, attempt = snap.job.progress_timeout_s, snap.attempt
    if not timeout or attempt is None or attempt.progress_at is None:
        return None

    def progress(p) -> float:
        own = getattr(p, "progress_at", None)
        return max(p.last_checkpoint_at or 0.0, attempt.progress_at if own is None else own)

    judged = _judged(snap, progress)
    return judged if judged is not None and judged[0] > timeout else None


def stuck_starting_for(snap: Snapshot) -> float | None:
    """Seconds since its launch of a running attempt whose driver heartbeats but has not
    started its pipelines (it has made no first progress report), once past
    ``job.progress-timeout`` and ``STARTUP_JUDGED_AFTER_S``.

    ``hung_for`` leaves start-up alone, and a driver stuck in it with its heartbeat thread
    going (a deadlock while planning, a source that never answers its schema call) would
    otherwise hold its job forever: found by the fault tests' hang after the first heartbeat."""
    timeout, attempt = snap.job.progress_timeout_s, snap.attempt
    if not timeout or attempt is None or attempt.state != AttemptState.RUNNING or attempt.progress_at is not None:
        return None
    starting = age(snap, attempt.launched_at or attempt.created_at)
    return starting if starting > max(timeout, STARTUP_JUDGED_AFTER_S) else None


def _on_stale(snap: Snapshot, stale_for: float, pipelines: list[int]) -> list:
    job = snap.job
    reason = (f"checkpoint stale: pipeline {', '.join(map(str, pipelines))} completed no checkpoint for "
              f"{stale_for:.0f} s while data is pending "
              f"(checkpoint.stale-after {job.stale_after_s:.0f} s, on-stale {job.on_stale}){start_waits(snap)}")
    return [FlagStale(stale_for, job.on_stale, tuple(pipelines)), *_policy(job.on_stale, reason)]


def _on_hung(snap: Snapshot, hung: float, what: str, pipelines: tuple = ()) -> list:
    """The verdict on a driver that heartbeats while ``what`` (stuck work, or a start-up)."""
    job = snap.job
    reason = (f"job hung: {what} while its driver kept heartbeating "
              f"(job.progress-timeout {job.progress_timeout_s:g} s, on-hung {job.on_hung}){start_waits(snap)}")
    return [FlagHung(hung, job.on_hung, pipelines), *_policy(job.on_hung, reason)]


def start_waits(snap: Snapshot) -> str:
    """What the start of the running pipelines waits for, as their driver says (``pipelines.waiting``,
    runtime/pipeline_start.py): a verdict on a start that does not settle says why it did not."""
    waits = [p.waiting for p in snap.pipelines if p.status == PipelineStatus.RUNNING and getattr(p, "waiting", None)]
    return f"; {'; '.join(waits)}" if waits else ""


def _policy(policy: str, reason: str) -> list:
    """warn: the flag alone; restart: a new attempt (the retry path); fail: FAILED now."""
    if policy == "restart":
        return [MarkAttemptLost(reason)]
    if policy == "fail":
        return [MarkAttemptLost(reason), EndPipelines(PipelineStatus.FAILED, reason), Finish(JobStatus.FAILED, reason)]
    return []


def worker_alive(node: Any | None, snap: Snapshot, timeouts: Timeouts) -> bool:
    return (node is not None and not node.stopped and node.node_id not in snap.dead_workers
            and age(snap, node.heartbeat_at) <= timeouts.worker_lost_after)


def lost_reason(snap: Snapshot, timeouts: Timeouts) -> str | None:
    """Why the live attempt can no longer be trusted to make progress, if it cannot."""
    attempt = snap.attempt
    node = snap.workers.get(attempt.worker_id)
    if died_with_worker(attempt, snap):
        return f"worker {attempt.worker_id} lost: it died (its liveness lock was released)"
    if attempt.worker_id in snap.dead_workers:
        return (f"worker {attempt.worker_id} lost: it died (its liveness lock was released) and driver pid "
                f"{attempt.pid} outlived it; the driver stops itself, and is replaced once it is silent")
    if not worker_alive(node, snap, timeouts):
        return f"worker {attempt.worker_id} lost (no heartbeat for {timeouts.worker_lost_after:.0f} s)"
    if attempt.state == AttemptState.RUNNING and age(snap, attempt.heartbeat_at) > timeouts.driver_hung_after:
        return f"driver pid {attempt.pid} hung (no heartbeat for {timeouts.driver_hung_after:.0f} s)"
    if attempt.state in (AttemptState.ASSIGNED, AttemptState.LAUNCHING) and age(snap, attempt.created_at) > timeouts.launch:
        return f"driver did not start within {timeouts.launch:.0f} s"
    return None


def process_gone(snap: Snapshot, timeouts: Timeouts) -> bool:
    """True once the ended current attempt's driver process surely no longer runs."""
    return attempt_gone(snap.attempt, snap, timeouts)


def attempt_gone(attempt: Any, snap: Snapshot, timeouts: Timeouts) -> bool:
    """True once an ended attempt's driver process surely no longer runs.

    Its worker reaped it (``ended_at``), or its worker died (its liveness lock has been free,
    and silent, long enough that a live worker would have killed its drivers and come back:
    ``died_with_worker``; a dead one's drivers died with it by ``PR_SET_PDEATHSIG``), or the worker
    is silent and the driver has been silent long enough to have fenced itself off (a
    driver cut off from the store with its worker may outlive it until then).
    """
    if attempt.ended_at is not None:
        return True
    if attempt.pid is None and attempt.state not in ATTEMPT_LIVE and attempt.launched_at is None:
        return True   # never launched
    if died_with_worker(attempt, snap):
        return True
    node = snap.workers.get(attempt.worker_id)
    silent = age(snap, attempt.heartbeat_at or attempt.created_at) > timeouts.driver_stops_within
    return not worker_alive(node, snap, timeouts) and silent


def retry_delay(snap: Snapshot, timeouts: Timeouts) -> float:
    """How long the ended attempt's job waits for its next one: ``job.retry.interval.seconds``,
    unless the attempt's worker is gone (died, stopped or silent).

    The interval keeps a job that fails by itself from retrying in a tight loop. A worker's
    death is the host's failure, not the job's: its jobs move to a live worker at once, as a
    Spark task moves off a lost executor. They still count against ``job.retry.times``, so
    a job that takes its workers down with it still runs out of retries."""
    worker = snap.attempt.worker_id
    if worker in snap.dead_workers or not worker_alive(snap.workers.get(worker), snap, timeouts):
        return 0.0
    return snap.job.retry_interval_s


def choose_worker(snap: Snapshot, timeouts: Timeouts) -> str | None:
    # A worker whose code heads another store revision than the store's starts drivers that refuse the store, or
    # (before 0021) read a job's ${NAME}s from their own environment: it is given none, whatever the job
    # (store/node_features.py); it finishes what it runs.
    candidates = [n for n in snap.workers.values() if worker_alive(n, snap, timeouts)
                  and snap.load.get(n.node_id, 0) < n.slots and heads_store(n, snap.store_revision)]
    if snap.job.pinned_worker:
        candidates = [n for n in candidates if n.node_id == snap.job.pinned_worker]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (snap.load.get(n.node_id, 0), n.node_id)).node_id
