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

Like ``reconcile_job``, one step is a pure decision (``decide_cleanup``) over what was read
(``CleanupView``), giving effects as data; ``apply_cleanup`` carries them out in order. Every
effect is idempotent, so a step cut short by a crash is simply decided and applied again.
The store write that ends a step (``MarkClean``, ``Forget``) comes last.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import and_, select, update

from seatide import failpoints
from seatide.store import schema as s
from seatide.store.clock import read_store_now, store_now
from seatide.store.db import Store, record_event
from seatide.store.jobs import forget_job
from seatide.store.states import CleanupState, JobStatus

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


def due_results(store: Store, now: float) -> list:
    with store.read() as conn:
        dirty = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup == CleanupState.DIRTY, s.job_results.c.next_cleanup_at <= now))).all()
        expired = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup == CleanupState.CLEAN, s.job_results.c.expires_at <= now))).all()
    return [*dirty, *expired]


# -- what one step reads ---------------------------------------------------------------

@dataclass(frozen=True)
class CleanupView:
    result: Any                       # the job_results row
    current: bool                     # the result is the job id's current incarnation
    leftovers: tuple = ()             # its attempts whose driver may still run
    checkpoint_dirs: tuple[str, ...] = ()
    existing_dirs: tuple[str, ...] = ()   # those of checkpoint_dirs on disk when read
    current_dirs: tuple[str, ...] = ()    # the job id's current incarnation's (a resume shares them)


# -- effects ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KillAttempt:
    attempt: Any


@dataclass(frozen=True)
class ReleaseSources:
    """Sources drop what they created outside Spark for the job (slots, publications)."""


@dataclass(frozen=True)
class RemoveCheckpoints:
    paths: tuple[str, ...]
    with_job_root: bool = False       # savepoints and set-aside copies, beside the pipelines


@dataclass(frozen=True)
class MarkClean:
    removed: tuple[str, ...]
    newer_incarnation: bool


@dataclass(frozen=True)
class Forget:
    """History expiry: the job's rows go."""


CleanupEffect = KillAttempt | ReleaseSources | RemoveCheckpoints | MarkClean | Forget


def decide_cleanup(view: CleanupView) -> list[CleanupEffect]:
    """The effects of one cleanup (DIRTY result) or expiry (CLEAN result past its expiry)."""
    result = view.result
    if result.cleanup == CleanupState.DIRTY:
        effects: list[CleanupEffect] = [KillAttempt(attempt) for attempt in view.leftovers]
        removed: tuple[str, ...] = ()
        if view.current and result.status == JobStatus.FINISHED:
            removed = view.existing_dirs
            effects += [ReleaseSources(), RemoveCheckpoints(removed)]
        return [*effects, MarkClean(removed, newer_incarnation=not view.current)]
    if not view.current:
        # A newer incarnation owns the directories it shares (a resume's); those only this
        # one used (a reused id's new run starts in its own) go with its rows.
        unused = tuple(d for d in view.checkpoint_dirs if d not in view.current_dirs)
        return [RemoveCheckpoints(unused), Forget()] if unused else [Forget()]
    return [ReleaseSources(), RemoveCheckpoints(view.checkpoint_dirs, with_job_root=True), Forget()]


# -- one step --------------------------------------------------------------------------

def reconcile_cleanup(store: Store, epoch: int, actor: str, result,
                      kill_attempt: Callable[[Any], None]) -> None:
    """One idempotent cleanup or expiry step for one job result."""
    try:
        if result.cleanup == CleanupState.DIRTY:
            failpoints.hit("coordinator.before_cleanup")
        effects = decide_cleanup(read_cleanup_view(store, result))
        apply_cleanup(store, epoch, actor, result, effects, kill_attempt)
    except Exception as exc:
        # A failed step (a source's server unreachable, say) is retried with backoff, for
        # this job only: cleanup by its due time, expiry by its expiry time.
        tries = result.cleanup_tries + 1
        delay = min(MAX_BACKOFF_S, 2.0 ** tries)
        step = "cleanup" if result.cleanup == CleanupState.DIRTY else "history expiry"
        log.warning("%s of job %s failed (try %s), again in %.0f s: %s", step, result.job_id, tries, delay, exc)
        with store.leader_tx(epoch) as conn:
            retry_at = read_store_now(conn) + delay       # compared with the store's time by due_results
            again = {"next_cleanup_at": retry_at} if result.cleanup == CleanupState.DIRTY else {"expires_at": retry_at}
            conn.execute(update(s.job_results).where(_key(result)).values(cleanup_tries=tries, **again))
            record_event(conn, "CLEANUP_RETRY", actor, result.job_id, result.incarnation, epoch,
                         tries=tries, error=str(exc))


def read_cleanup_view(store: Store, result) -> CleanupView:
    with store.read() as conn:
        newest = conn.execute(select(s.jobs.c.incarnation).where(s.jobs.c.job_id == result.job_id)).scalar()
        current = newest == result.incarnation
        leftovers = () if result.cleanup != CleanupState.DIRTY else tuple(conn.execute(
            select(s.attempts).where(and_(
                s.attempts.c.job_id == result.job_id, s.attempts.c.incarnation == result.incarnation,
                s.attempts.c.ended_at.is_(None), s.attempts.c.pid.isnot(None)))).all())
        dirs = _checkpoint_dirs(conn, result.job_id, result.incarnation)
        current_dirs = dirs if current or newest is None else _checkpoint_dirs(conn, result.job_id, newest)
    return CleanupView(result, current, leftovers, dirs, tuple(d for d in dirs if os.path.isdir(d)), current_dirs)


def _checkpoint_dirs(conn, job_id: str, incarnation: int) -> tuple[str, ...]:
    return tuple(row.checkpoint_dir for row in conn.execute(select(s.pipelines.c.checkpoint_dir).where(and_(
        s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == incarnation))))


def apply_cleanup(store: Store, epoch: int, actor: str, result, effects: list[CleanupEffect],
                  kill_attempt: Callable[[Any], None]) -> None:
    for effect in effects:
        match effect:
            case KillAttempt(attempt):
                kill_attempt(attempt)
            case ReleaseSources():
                _release_sources(store, result)
            case RemoveCheckpoints(paths, with_job_root):
                _remove_checkpoints(result, paths, with_job_root)
            case MarkClean(removed, newer):
                with store.leader_tx(epoch) as conn:
                    conn.execute(update(s.job_results).where(and_(
                        _key(result), s.job_results.c.cleanup == CleanupState.DIRTY))
                        .values(cleanup=CleanupState.CLEAN, cleaned_at=store_now(conn)))
                    record_event(conn, "CLEANUP_DONE", actor, result.job_id, result.incarnation, epoch,
                                 removed=list(removed), newer_incarnation=newer)
            case Forget():
                with store.leader_tx(epoch) as conn:
                    forget_job(conn, result.job_id, result.incarnation)
                    record_event(conn, "HISTORY_EXPIRED", actor, result.job_id, result.incarnation, epoch)


def _key(result):
    return and_(s.job_results.c.job_id == result.job_id, s.job_results.c.incarnation == result.incarnation)


def _remove_checkpoints(result, paths: tuple[str, ...], with_job_root: bool) -> None:
    for path in paths:
        if not with_job_root:     # a cleanup that cannot remove them fails, and is retried
            if os.path.isdir(path):
                shutil.rmtree(path)
            continue
        shutil.rmtree(path, ignore_errors=True)
        root = os.path.dirname(path.rstrip("/"))
        if os.path.basename(root) == result.job_id:
            shutil.rmtree(root, ignore_errors=True)


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
