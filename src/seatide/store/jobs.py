"""User intent (submit, stop) and read models of jobs.

Submitting and stopping write *desired* state; any process may do it (the REST API of
any coordinator, ``seatide run``, the CLI straight on a store). Only the leader moves a
job's *status*, in ``seatide.coordinator``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.clock import read_store_now, store_now
from seatide.store.event_masking import keep_masked
from seatide.store.events import record_event
from seatide.store.db import Store
from seatide.store.job_ids import BadJobId, JobRefused, check_job_id  # noqa: F401  JobRefused: restore.py imports it here
from seatide.store.paths import PathOutsideRoot, under
from seatide.store.runs import new_run_id, pipeline_dir, run_root
from seatide.store.sessions import REQUEST_KEEPS_TRYING_S, again_on_new_session
from seatide.store.states import JOB_TERMINAL, Desired, JobStatus, PipelineStatus
from seatide.timeouts import Timeouts


class JobNotFound(JobRefused):
    pass


MAX_JOB_NAME = 256      # the width of jobs.name


def new_job_id() -> str:
    # Sortable by time, unique without coordination (like SeaTunnel's numeric ids).
    return f"{int(time.time() * 1000)}{secrets.randbelow(1000):03d}"


def checkpoint_root(data_dir: str, job_id: str) -> str:
    try:
        return under(os.path.join(data_dir, "checkpoints"), check_job_id(job_id))
    except PathOutsideRoot as exc:    # belt and braces: check_job_id already refuses such ids
        raise BadJobId(f"job id {job_id!r}: {exc}") from None


def submit_job(store: Store, *, text: str, variables: dict[str, str], config, plan, outline: str, data_dir: str,
               job_id: str | None = None, name: str | None = None, pinned_worker: str | None = None,
               cleanup_delay_s: float | None = None, actor: str = "client") -> str:
    """Record a validated job as CREATED; the leader takes it from there.

    A job id may be reused once its previous run has ended and been cleaned up; the new
    run is the id's next incarnation, under a run id of its own (``store/runs.py``). While
    cleanup is pending the id is refused. A new run starts from nothing: its pipelines get
    checkpoint directories of their own, since a stopped run's are kept (for a resume) and
    would otherwise be restored silently, and a dead run's late removal never reaches them.

    ``outline`` is the job's outline as ``plan.outline.outline_json`` makes it, computed by the
    caller: the store records what it is given and imports nothing of plan.
    """
    job_id = check_job_id(job_id) if job_id is not None else new_job_id()
    env = config.env
    delay = cleanup_delay_s if env.state_cleanup_delay_s is None else env.state_cleanup_delay_s
    values = dict(
        name=name or env.name, config=text, variables=json.dumps(variables), outline=outline,
        mode=env.mode,
        desired=Desired.RUN, status=JobStatus.CREATED, retries_used=0, max_retries=env.retry_times,
        retry_interval_s=float(env.retry_interval_s), next_attempt_at=None, current_attempt=None,
        pinned_worker=pinned_worker, restored_from=None, restore=None, error_msg=None,
        cleanup_delay_s=float(Timeouts.state_cleanup_delay if delay is None else delay),
        checkpoint_interval_ms=env.checkpoint_interval_ms, stale_after_s=env.stale_after_s,
        on_stale=env.on_stale, stale_since=None, checkpoints_retained=env.checkpoints_retained,
        progress_timeout_s=env.progress_timeout_s, on_hung=env.on_hung, hung_since=None, finished_at=None,
        release=None, released_at=None)
    # The run's id is drawn before the first try: a try taken again after the store ended its
    # session (store/sessions.py) knows its own run if the first one had landed after all.
    run_id = new_run_id()
    again_on_new_session(lambda: _record_submit(store, job_id, run_id, values, config, plan, data_dir, actor),
                         what=f"submitting job {job_id}", within=REQUEST_KEEPS_TRYING_S)
    return job_id


def _record_submit(store: Store, job_id: str, run_id: str, values: dict, config, plan, data_dir: str,
                   actor: str) -> None:
    env = config.env
    with store.write() as conn:
        now = read_store_now(conn)       # stamps are the store's time (store/clock.py)
        values = {**values, "created_at": now, "updated_at": now, "run_id": run_id}
        existing = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
        if existing is not None and existing.run_id == run_id:
            return                       # this submit's earlier try landed
        if existing is None:
            incarnation = 1
            conn.execute(insert(s.jobs).values(job_id=job_id, incarnation=1, **values))
        else:
            _refuse_reuse(conn, existing)
            incarnation = existing.incarnation + 1
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id)
                         .values(incarnation=incarnation, **values))
        root = run_root(checkpoint_root(data_dir, job_id), run_id)
        for pipeline in plan.pipelines:
            conn.execute(insert(s.pipelines).values(
                job_id=job_id, incarnation=incarnation, pipeline_id=pipeline.pipeline_id,
                status=PipelineStatus.CREATED, fingerprint=pipeline.fingerprint(),
                checkpoint_dir=pipeline_dir(root, pipeline.pipeline_id),
                rows_read=0, rows_written=0, idle=False))
        record_event(conn, "JOB_SUBMITTED", actor, job_id, incarnation, name=values["name"],
                     pipelines=len(plan.pipelines), mode=env.mode, run=run_id)


def _refuse_reuse(conn: Connection, existing) -> None:
    if existing.status not in JOB_TERMINAL:
        raise JobRefused(f"job {existing.job_id} is already {existing.status}; cancel it first or "
                         "submit under another id")
    result = conn.execute(select(s.job_results).where(and_(
        s.job_results.c.job_id == existing.job_id,
        s.job_results.c.incarnation == existing.incarnation))).first()
    if result is not None and result.cleanup != "CLEAN":
        wait = max(0, int(result.next_cleanup_at - read_store_now(conn)))
        raise JobRefused(f"job id {existing.job_id} ended {existing.status} and its cleanup is still "
                         f"pending (due in about {wait} s); submit under another id or wait for the cleanup")


def request_stop(store: Store, job_id: str, savepoint: bool = False, actor: str = "client",
                 release: bool = False) -> str:
    """Ask for a cancel or a stop-with-savepoint; returns the job's status at the time.

    ``release``: cancel and release (coordinator/release.py): once the job has ended, the leader
    drops what its sources hold (a replication slot) and the job can only be resumed fresh. Also
    for a job that has ended already (CANCELED, FAILED, SAVEPOINT_DONE)."""
    if release and savepoint:
        raise JobRefused(f"job {job_id}: a stop with a savepoint keeps the job's position to resume from, and a "
                         "release drops it; cancel with --release, or take the savepoint without it")
    desired = "SAVEPOINT" if savepoint else "CANCEL"
    # Idempotent: a request already recorded is not recorded again. So a try cut off by the end
    # of its store session is taken again on a new one (store/sessions.py).
    return again_on_new_session(lambda: _record_stop(store, job_id, savepoint, desired, actor, release),
                                what=f"stopping job {job_id}", within=REQUEST_KEEPS_TRYING_S)


def _record_stop(store: Store, job_id: str, savepoint: bool, desired: str, actor: str, release: bool) -> str:
    with store.write() as conn:
        query = select(s.jobs).where(s.jobs.c.job_id == job_id)
        job = conn.execute(query if store.is_sqlite else query.with_for_update()).first()
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        key = and_(s.jobs.c.job_id == job_id, s.jobs.c.incarnation == job.incarnation)
        if job.status in JOB_TERMINAL:
            if not release:
                raise JobRefused(f"job {job_id} has already ended ({job.status})")
            _check_releasable(conn, job)
        elif job.desired == "CANCEL" and savepoint:
            raise JobRefused(f"job {job_id} is being canceled; a savepoint can no longer be taken")
        elif job.desired != desired:
            conn.execute(update(s.jobs).where(key).values(desired=desired, updated_at=store_now(conn)))
            record_event(conn, "STOP_REQUESTED", actor, job_id, job.incarnation, savepoint=savepoint, release=release)
        if release and job.release is None:
            conn.execute(update(s.jobs).where(key).values(release="REQUESTED", updated_at=store_now(conn)))
            record_event(conn, "RELEASE_REQUESTED", actor, job_id, job.incarnation, status=job.status)
        return job.status


def _check_releasable(conn: Connection, job) -> None:
    if job.status == JobStatus.FINISHED:
        raise JobRefused(f"job {job.job_id} FINISHED: its cleanup released what its sources held; nothing to release")
    cleanup = conn.execute(select(s.job_results.c.cleanup).where(and_(
        s.job_results.c.job_id == job.job_id, s.job_results.c.incarnation == job.incarnation))).scalar()
    if cleanup == "EXPIRING":
        raise JobRefused(f"job {job.job_id}'s history is expiring: what its sources hold is being released with it")


# -- read models -------------------------------------------------------------------------
@dataclass
class JobView:
    job: Any
    attempt: Any | None
    pipelines: list[Any] = field(default_factory=list)
    checkpoints: dict[str, Any] = field(default_factory=dict)


def load_job(conn: Connection, job_id: str):
    return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()


def job_view(conn: Connection, job_id: str) -> JobView | None:
    job = load_job(conn, job_id)
    if job is None:
        return None
    attempt = None
    if job.current_attempt is not None:
        attempt = conn.execute(select(s.attempts).where(
            s.attempts.c.attempt_id == job.current_attempt)).first()
    pipes = conn.execute(select(s.pipelines).where(and_(
        s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == job.incarnation))
        .order_by(s.pipelines.c.pipeline_id)).all()
    return JobView(job, attempt, list(pipes))


def forget_job(conn: Connection, job_id: str, incarnation: int) -> None:
    """Drop a job's history rows (after history expiry); events stay as the audit trail, masked
    first with the configs that go (``event_masking.keep_masked``).

    Older incarnations go with it: one resumed before it had ended (killed, or never
    started) has no job result of its own whose expiry would drop its rows."""
    row_goes = conn.execute(select(s.jobs.c.incarnation).where(s.jobs.c.job_id == job_id)).scalar() == incarnation
    keep_masked(conn, job_id, None if row_goes else range(incarnation + 1))
    for table in (s.pipelines, s.source_ends, s.attempts, s.checkpoints, s.sink_manifests, s.job_results,
                  s.source_holds):
        conn.execute(delete(table).where(and_(table.c.job_id == job_id, table.c.incarnation <= incarnation)))
    conn.execute(delete(s.jobs).where(and_(s.jobs.c.job_id == job_id, s.jobs.c.incarnation == incarnation)))


def forget_result(conn: Connection, job_id: str, incarnation: int) -> None:
    """Drop an earlier incarnation's job result (its expiry while the run goes on), its events masked first
    with its config (``event_masking.keep_masked``): they were shown masked with it until now."""
    keep_masked(conn, job_id, [incarnation])
    conn.execute(delete(s.job_results).where(and_(s.job_results.c.job_id == job_id,
                                                  s.job_results.c.incarnation == incarnation)))
