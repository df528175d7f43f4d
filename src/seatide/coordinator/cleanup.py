"""reconcile_cleanup: terminal jobs' cleanup and history expiry, driven by the store.

A terminal job's result is written DIRTY with a due time, in the same transaction as
its status. Whichever coordinator leads when it is due cleans up: it puts down any
driver left over, removes what the job no longer needs (a FINISHED job's checkpoints;
a CANCELED, FAILED or SAVEPOINT_DONE job keeps them so it can be resumed), and marks
the result CLEAN. It never touches a newer incarnation of the same job id. A failed
cleanup is retried with backoff. History expiry later drops the job's rows.

Whenever a job's checkpoints go for good, so does what its sources hold outside Spark for
it (``Source.release``: a replication slot and its publication), in the same step and
before the step is recorded, so a failed release is retried with it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil

from sqlalchemy import and_, select, update

from seatide import clock, failpoints
from seatide.store import schema as s
from seatide.store.db import Store, record_event
from seatide.store.jobs import forget_job

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


def due_results(store: Store, now: float) -> list:
    with store.read() as conn:
        dirty = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup == "DIRTY", s.job_results.c.next_cleanup_at <= now))).all()
        expired = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup == "CLEAN", s.job_results.c.expires_at <= now))).all()
    return [*dirty, *expired]


def reconcile_cleanup(store: Store, epoch: int, actor: str, result, kill_attempt) -> None:
    """One idempotent cleanup or expiry step for one job result."""
    try:
        if result.cleanup == "DIRTY":
            _clean(store, epoch, actor, result, kill_attempt)
        else:
            _expire(store, epoch, actor, result)
    except Exception as exc:
        # A failed step (a source's server unreachable, say) is retried with backoff, for
        # this job only: cleanup by its due time, expiry by its expiry time.
        tries = result.cleanup_tries + 1
        delay = min(MAX_BACKOFF_S, 2.0 ** tries)
        step = "cleanup" if result.cleanup == "DIRTY" else "history expiry"
        log.warning("%s of job %s failed (try %s), again in %.0f s: %s", step, result.job_id, tries, delay, exc)
        again = {"next_cleanup_at": clock.now() + delay} if result.cleanup == "DIRTY" else \
            {"expires_at": clock.now() + delay}
        with store.leader_tx(epoch) as conn:
            conn.execute(update(s.job_results).where(_key(result)).values(cleanup_tries=tries, **again))
            record_event(conn, "CLEANUP_RETRY", actor, result.job_id, result.incarnation, epoch,
                         tries=tries, error=str(exc))


def _key(result):
    return and_(s.job_results.c.job_id == result.job_id, s.job_results.c.incarnation == result.incarnation)


def _pipeline_dirs(store: Store, result) -> list[str]:
    with store.read() as conn:
        return [row.checkpoint_dir for row in conn.execute(select(s.pipelines.c.checkpoint_dir).where(and_(
            s.pipelines.c.job_id == result.job_id, s.pipelines.c.incarnation == result.incarnation)))]


def _is_current(conn, result) -> bool:
    current = conn.execute(select(s.jobs.c.incarnation).where(s.jobs.c.job_id == result.job_id)).scalar()
    return current == result.incarnation


def _clean(store: Store, epoch: int, actor: str, result, kill_attempt) -> None:
    failpoints.hit("coordinator.before_cleanup")
    with store.read() as conn:
        current = _is_current(conn, result)
        leftovers = conn.execute(select(s.attempts).where(and_(
            s.attempts.c.job_id == result.job_id, s.attempts.c.incarnation == result.incarnation,
            s.attempts.c.ended_at.is_(None), s.attempts.c.pid.isnot(None)))).all()
    for attempt in leftovers:
        kill_attempt(attempt)
    removed = []
    if current and result.status == "FINISHED":
        _release_sources(store, result)
        for path in _pipeline_dirs(store, result):
            if os.path.isdir(path):
                shutil.rmtree(path)
                removed.append(path)
    with store.leader_tx(epoch) as conn:
        conn.execute(update(s.job_results).where(and_(_key(result), s.job_results.c.cleanup == "DIRTY"))
                     .values(cleanup="CLEAN", cleaned_at=clock.now()))
        record_event(conn, "CLEANUP_DONE", actor, result.job_id, result.incarnation, epoch,
                     removed=removed, newer_incarnation=not current)


def _release_sources(store: Store, result) -> None:
    """Let each source drop what it created outside Spark for this job (idempotent)."""
    from seatide.config.loader import ConfigError, load_job_text

    with store.read() as conn:
        job = conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(
            s.jobs.c.job_id == result.job_id)).first()
    if job is None:
        return
    variables = json.loads(job.variables or "{}")
    try:
        config = load_job_text(job.config, variables, source_name=f"job {result.job_id}")
    except ConfigError as exc:   # e.g. a plugin this version no longer has: nothing of it to release
        from seatide.secrets import mask_message, secret_values
        log.warning("job %s: sources not released, its config no longer loads: %s", result.job_id,
                    mask_message(str(exc), secret_values(job.config, variables)))
        return
    for spec in config.sources:
        spec.plugin.release(result.job_id)


def _expire(store: Store, epoch: int, actor: str, result) -> None:
    with store.read() as conn:
        current = _is_current(conn, result)
    if current:
        _release_sources(store, result)
        for path in _pipeline_dirs(store, result):
            shutil.rmtree(path, ignore_errors=True)
            # Savepoints and set-aside copies live beside the pipelines, under the job's root.
            root = os.path.dirname(path.rstrip("/"))
            if os.path.basename(root) == result.job_id:
                shutil.rmtree(root, ignore_errors=True)
    with store.leader_tx(epoch) as conn:
        forget_job(conn, result.job_id, result.incarnation)
        record_event(conn, "HISTORY_EXPIRED", actor, result.job_id, result.incarnation, epoch)
