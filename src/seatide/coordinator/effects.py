"""Applying reconcile decisions: one fenced transaction per job, compare-and-set on what was read.

The decision was made on a snapshot; inside the transaction the job row is read again,
locked (``FOR UPDATE`` on PostgreSQL; SQLite's write lock is the whole store), and the
effects apply only if its incarnation, status and current attempt are still what the
decision saw. Otherwise nothing changes and the next tick decides afresh. Holding the lock
to the commit is what makes it a compare-and-set: under READ COMMITTED a resume's new
incarnation could otherwise land between the read and a ``Finish``, which would then end it.
Every job write also names the incarnation it was decided for.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from seatide import failpoints
from seatide.coordinator import reconcile as r
from seatide.store import schema as s
from seatide.store.db import Store, record_event
from seatide.store.states import (PIPELINE_TERMINAL, AttemptState, CleanupState, JobStatus, check_attempt, check_job,
                                  check_pipeline)
from seatide.store.wakeups import announce_assignment

log = logging.getLogger(__name__)


class Applier:
    def __init__(self, store: Store, node_id: str, history_expire_s: float):
        self.store = store
        self.actor = f"coordinator:{node_id}"
        self.history_expire_s = history_expire_s

    def apply(self, epoch: int, snap: r.Snapshot, actions: list[r.Action]) -> list:
        """Apply in one leader transaction; returns attempts whose drivers should be killed."""
        kills = []
        finished = any(isinstance(a, r.Finish) for a in actions)
        with self.store.leader_tx(epoch) as conn:
            query = select(s.jobs).where(s.jobs.c.job_id == snap.job.job_id)
            job = conn.execute(query if self.store.is_sqlite else query.with_for_update()).first()
            failpoints.hit("coordinator.apply_after_read")
            if (job is None or job.incarnation != snap.job.incarnation or job.status != snap.job.status
                    or job.current_attempt != snap.job.current_attempt):
                return []
            ctx = _Ctx(conn, job, epoch, self.actor, snap.now)    # the store's clock, read this tick
            for action in actions:
                killed = self._apply_one(ctx, snap, action)
                if killed is not None:
                    kills.append(killed)
        if finished:
            failpoints.hit("coordinator.after_terminal_status")
        return kills

    def _apply_one(self, ctx: "_Ctx", snap, action: r.Action):
        """The one place each decision becomes writes; returns an attempt whose driver must die."""
        match action:
            case r.SetStatus():
                self._set_status(ctx, snap, action)
            case r.CreateAttempt():
                self._create_attempt(ctx, snap, action)
            case r.MarkAttemptLost():
                return self._mark_attempt_lost(ctx, snap, action)
            case r.FlagStale():
                self._flag_stale(ctx, snap, action)
            case r.FlagHung():
                self._flag_hung(ctx, snap, action)
            case r.ScheduleRetry():
                self._schedule_retry(ctx, snap, action)
            case r.EndPipelines():
                self._end_pipelines(ctx, snap, action)
            case r.Finish():
                self._finish(ctx, snap, action)
            case _:
                raise TypeError(f"no effect for {action!r}")
        return None

    # -- one method per effect ---------------------------------------------------------------
    def _set_status(self, ctx: "_Ctx", snap, action: r.SetStatus) -> None:
        ctx.set_status(action.status)

    def _create_attempt(self, ctx: "_Ctx", snap, action: r.CreateAttempt) -> None:
        job = ctx.job
        number = (ctx.conn.execute(select(func.max(s.attempts.c.number)).where(and_(
            s.attempts.c.job_id == job.job_id, s.attempts.c.incarnation == job.incarnation))).scalar() or 0) + 1
        attempt_id = ctx.conn.execute(insert(s.attempts).values(
            job_id=job.job_id, incarnation=job.incarnation, number=number, worker_id=action.worker_id,
            state=AttemptState.ASSIGNED, created_at=ctx.now, kill_requested=False)).inserted_primary_key[0]
        ctx.update(current_attempt=attempt_id, next_attempt_at=None, stale_since=None, hung_since=None)
        ctx.set_status(JobStatus.SCHEDULED)
        ctx.event("ATTEMPT_ASSIGNED", attempt=attempt_id, number=number, worker=action.worker_id)
        announce_assignment(ctx.conn, action.worker_id)      # the worker claims it now, not at its next poll

    def _mark_attempt_lost(self, ctx: "_Ctx", snap, action: r.MarkAttemptLost):
        attempt = snap.attempt
        check_attempt(attempt.state, AttemptState.LOST)
        done = ctx.conn.execute(update(s.attempts).where(and_(
            s.attempts.c.attempt_id == attempt.attempt_id, s.attempts.c.state == attempt.state))
            .values(state=AttemptState.LOST, kill_requested=True, error=action.reason)).rowcount
        if done:
            ctx.event("ATTEMPT_LOST", attempt=attempt.attempt_id, reason=action.reason)
            return attempt
        return None

    def _flag_stale(self, ctx: "_Ctx", snap, action: r.FlagStale) -> None:
        ctx.update(stale_since=ctx.now)
        ctx.event("CHECKPOINT_STALE", seconds=round(action.seconds, 1), policy=action.policy,
                  attempt=snap.attempt.attempt_id, pipelines=list(action.pipelines))

    def _flag_hung(self, ctx: "_Ctx", snap, action: r.FlagHung) -> None:
        attempt = snap.attempt
        ctx.update(hung_since=ctx.now)
        ctx.event("JOB_HUNG", seconds=round(action.seconds, 1), policy=action.policy,
                  attempt=attempt.attempt_id, tasks_done=attempt.tasks_done, pipelines=list(action.pipelines))

    def _schedule_retry(self, ctx: "_Ctx", snap, action: r.ScheduleRetry) -> None:
        retry = ctx.job.retries_used + (1 if action.charged else 0)
        ctx.set_status(JobStatus.FAILING, error=action.cause)
        ctx.update(retries_used=retry, next_attempt_at=action.at)
        ctx.set_status(JobStatus.PENDING)
        ctx.event("RETRY_SCHEDULED", retry=retry, of=ctx.job.max_retries, at=action.at, cause=action.cause,
                  charged=action.charged)

    def _end_pipelines(self, ctx: "_Ctx", snap, action: r.EndPipelines) -> None:
        job = ctx.job
        rows = ctx.conn.execute(select(s.pipelines).where(and_(
            s.pipelines.c.job_id == job.job_id, s.pipelines.c.incarnation == job.incarnation))).all()
        for row in rows:
            if row.status in PIPELINE_TERMINAL:
                continue
            check_pipeline(row.status, action.status)
            ctx.conn.execute(update(s.pipelines).where(and_(
                s.pipelines.c.job_id == job.job_id, s.pipelines.c.incarnation == job.incarnation,
                s.pipelines.c.pipeline_id == row.pipeline_id)).values(
                status=action.status, finished_at=ctx.now, error=action.error))
            ctx.event(f"PIPELINE_{action.status}", pipeline=row.pipeline_id, error=action.error)

    def _finish(self, ctx: "_Ctx", snap, action: r.Finish) -> None:
        """Terminal status and a dirty job result, in one transaction (JobResultStore)."""
        job = ctx.job
        ctx.set_status(action.status, error=action.error)
        ctx.update(finished_at=ctx.now)
        ctx.conn.execute(insert(s.job_results).values(
            job_id=job.job_id, incarnation=job.incarnation, run_id=job.run_id, config=job.config,
            variables=job.variables, status=action.status, cleanup=CleanupState.DIRTY,
            cleanup_due_at=ctx.now + job.cleanup_delay_s, cleanup_tries=0,
            next_cleanup_at=ctx.now + job.cleanup_delay_s,
            expires_at=ctx.now + self.history_expire_s, created_at=ctx.now))


class _Ctx:
    """The job row inside the transaction, kept current as effects change it."""

    def __init__(self, conn: Connection, job, epoch: int, actor: str, now: float):
        self.conn, self.job, self.epoch, self.actor, self.now = conn, job, epoch, actor, now

    def update(self, **values) -> None:
        values["updated_at"] = self.now
        where = and_(s.jobs.c.job_id == self.job.job_id, s.jobs.c.incarnation == self.job.incarnation)
        if self.conn.execute(update(s.jobs).where(where).values(**values)).rowcount != 1:
            raise RuntimeError(f"job {self.job.job_id} incarnation {self.job.incarnation} changed under its lock")
        self.job = self.conn.execute(select(s.jobs).where(where)).first()

    def set_status(self, new: str, error: str | None = None) -> None:
        old = self.job.status
        if old == new:
            return
        check_job(old, new)
        values = {"status": new}
        if error is not None:
            values["error_msg"] = error
        self.update(**values)
        self.event(f"JOB_{new}", previous=old, error=error)

    def event(self, kind: str, **detail) -> None:
        record_event(self.conn, kind, self.actor, self.job.job_id, self.job.incarnation, self.epoch, **detail)


__all__ = ["Applier"]
