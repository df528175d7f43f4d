"""reconcile_cleanup: terminal jobs' cleanup and history expiry, driven by the store.

A terminal job's result is written DIRTY with a due time, in the same transaction as
its status. Whichever coordinator leads when it is due cleans up: it puts down any
driver left over, removes what the job no longer needs (a FINISHED job's checkpoints;
a CANCELED, FAILED or SAVEPOINT_DONE job keeps them so it can be resumed), and marks
the result CLEAN. It never touches a newer incarnation of the same job id. A failed
cleanup is retried with backoff. History expiry later drops the job's rows.

Destructive steps are decided under the lease and touch only what the decider owns:

* an expiry first marks its result EXPIRING in a leader transaction that checks, against
  the job row it locks, that the result is still the job's current incarnation; from then a
  resume is refused (``store/restore.py``), so no driver can start from a directory being
  removed, and a view read before a resume is never acted on;
* what it removes belongs to the result's run (``store/runs.py``): a run's directories,
  slots and transaction ids are its own, so a slow or former leader's late removal reaches
  only a run that is already dead, never a job id's next run.

Whenever a job's checkpoints go for good, so does what its sources hold outside Spark for
it (``Source.release``: a replication slot and its publication), in the same step and
before the step is recorded, so a failed release is retried with it.

Like ``reconcile_job``, one step is a pure decision (``decide_cleanup``) over what was read
(``CleanupView``), giving effects as data; ``apply_cleanup`` carries them out in order. Every
effect is idempotent, so a step cut short by a crash is simply decided and applied again.
The store write that ends a step (``MarkClean``, ``Forget``) comes last.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import and_, select, update

from seatide import failpoints
from seatide.store import schema as s
from seatide.store.clock import read_store_now, store_now
from seatide.coordinator.left_out_sources import left_out_configs
from seatide.coordinator.source_release import release_sources
from seatide.coordinator.door import (DecidedFor, StepOverruled, current_run, destructive_step, fenced_read,
                                      owned_paths, result_of_run)
from seatide.secrets import mask_message
from seatide.store.db import NotLeader, Store, record_event
from seatide.store.event_masking import config_secrets
from seatide.store.jobs import forget_job, forget_result
from seatide.store.states import CleanupState, JobStatus

log = logging.getLogger(__name__)

# The history period when the caller does not say: the coordinator's default (--history-job-expire-minutes).
HISTORY_PERIOD_S = 1440 * 60.0

MAX_BACKOFF_S = 60.0


def due_results(store: Store, now: float) -> list:
    with store.read() as conn:
        dirty = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup == CleanupState.DIRTY, s.job_results.c.next_cleanup_at <= now))).all()
        expired = conn.execute(select(s.job_results).where(and_(
            s.job_results.c.cleanup.in_([CleanupState.CLEAN, CleanupState.EXPIRING]),
            s.job_results.c.expires_at <= now))).all()
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
    same_run: bool = True             # the job id's current incarnation is of the result's run
    # An earlier incarnation of the current run: those of its directories whose pipeline the current
    # config leaves out (kept, to be brought back), and whether its config is the one that names their
    # sources (coordinator/left_out_sources.py: their slots are watched and released through it).
    left_out_dirs: tuple[str, ...] = ()
    names_left_out: bool = False


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
class DecideExpiry:
    """Mark the result EXPIRING, under the lease, if it is still the job's current incarnation."""


@dataclass(frozen=True)
class MarkClean:
    removed: tuple[str, ...]
    newer_incarnation: bool


@dataclass(frozen=True)
class Forget:
    """History expiry: the job's rows go. ``whole_run`` False: an earlier incarnation of a run
    that a resume carries on; only its result goes, the run's rows stay for the run (its sink
    decisions, savepoints and checkpoints are the later incarnation's to roll forward and
    restore from) and go with the run's own expiry."""
    whole_run: bool = True


@dataclass(frozen=True)
class KeepForLeftOut:
    """History expiry of an earlier incarnation whose config names a pipeline left out since: its result
    (that config) stays another history period, and goes with the run's own expiry at the latest."""


CleanupEffect = KillAttempt | ReleaseSources | DecideExpiry | RemoveCheckpoints | MarkClean | Forget | KeepForLeftOut


class ExpiryOverruled(Exception):
    """The job moved on (a resume) between the view and the expiry's decision: nothing is done."""


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
    if not view.current and not view.same_run:
        # A dead run (its job id was submitted again): nothing of it can be resumed any more,
        # and all it left is its own (store/runs.py).
        return [ReleaseSources(), RemoveCheckpoints(view.checkpoint_dirs, with_job_root=True), Forget()]
    if not view.current:
        # A newer incarnation owns the directories it shares (a resume's); those only this
        # one used go now. The run's rows stay until the run expires (found by the simulation:
        # an earlier incarnation's expiry took the run's save-mode decision with its rows).
        # A pipeline the current config leaves out keeps its directory, and its source's config.
        unused = tuple(d for d in view.checkpoint_dirs if d not in view.current_dirs and d not in view.left_out_dirs)
        last = KeepForLeftOut() if view.names_left_out else Forget(whole_run=False)
        return [RemoveCheckpoints(unused), last] if unused else [last]
    return [DecideExpiry(), ReleaseSources(), RemoveCheckpoints(view.checkpoint_dirs, with_job_root=True), Forget()]


# -- one step --------------------------------------------------------------------------

def reconcile_cleanup(store: Store, epoch: int, actor: str, result,
                      kill_attempt: Callable[[Any], None], history_s: float = HISTORY_PERIOD_S) -> None:
    """One idempotent cleanup or expiry step for one job result; ``history_s``: the history period.

    ``result`` is the row ``due_results`` read, maybe long ago by a leader that stalled since:
    the step re-reads it in the leader's transaction and goes on only while it is the same
    run's (``coordinator/door.py``)."""
    try:
        if result.cleanup == CleanupState.DIRTY:
            failpoints.hit("coordinator.before_cleanup")
        with fenced_read(store, epoch, decided_for(result), _fence(result)) as opened:
            view = _read_view(opened.conn, opened.row, opened.job)
        apply_cleanup(store, epoch, actor, view.result, decide_cleanup(view), kill_attempt, history_s)
    except (ExpiryOverruled, StepOverruled) as exc:
        log.info("%s of job %s skipped: %s", _step_name(result), result.job_id, exc)
    except NotLeader:
        raise
    except Exception as exc:
        # A failed step (a source's server unreachable, say) is retried with backoff, for
        # this job only: cleanup by its due time, expiry by its expiry time.
        tries = result.cleanup_tries + 1
        delay = min(MAX_BACKOFF_S, 2.0 ** tries)
        # A connector's own exception may quote what it connected with (review 8, F9): masked with the run's secrets.
        error = mask_message(str(exc), config_secrets(result.config, result.variables) if result.config else ())
        log.warning("%s of job %s failed (try %s), again in %.0f s: %s", _step_name(result), result.job_id, tries,
                    delay, error)
        with store.leader_tx(epoch) as conn:
            retry_at = read_store_now(conn) + delay       # compared with the store's time by due_results
            again = {"next_cleanup_at": retry_at} if result.cleanup == CleanupState.DIRTY else {"expires_at": retry_at}
            conn.execute(update(s.job_results).where(and_(_key(result), s.job_results.c.run_id == result.run_id))
                         .values(cleanup_tries=tries, **again))
            record_event(conn, "CLEANUP_RETRY", actor, result.job_id, result.incarnation, epoch, run_id=result.run_id,
                         tries=tries, error=error)


def _step_name(result) -> str:
    return "cleanup" if result.cleanup == CleanupState.DIRTY else "history expiry"


def decided_for(result) -> DecidedFor:
    return DecidedFor(result.job_id, result.run_id, result.incarnation)


def _fence(result):
    """A cleanup acts on a DIRTY result, an expiry on a CLEAN or EXPIRING one, of the same run."""
    if result.cleanup == CleanupState.DIRTY:
        return result_of_run(CleanupState.DIRTY)
    return result_of_run(CleanupState.CLEAN, CleanupState.EXPIRING)


def read_cleanup_view(store: Store, result) -> CleanupView:
    """What one step reads (outside a step: tests look at a view read before a pause)."""
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == result.job_id)).first()
        return _read_view(conn, result, job)


def _read_view(conn, result, job) -> CleanupView:
    newest = job.incarnation if job is not None else None
    # The run, not the incarnation: a job id submitted again after its rows were forgotten
    # starts at incarnation 1 once more.
    current = current_run(job, decided_for(result))
    same_run = job is not None and job.run_id == result.run_id
    leftovers = () if result.cleanup != CleanupState.DIRTY else tuple(conn.execute(
        select(s.attempts).where(and_(
            s.attempts.c.job_id == result.job_id, s.attempts.c.incarnation == result.incarnation,
            s.attempts.c.ended_at.is_(None), s.attempts.c.pid.isnot(None)))).all())
    by_pipeline = _checkpoint_dirs(conn, result.job_id, result.incarnation)
    dirs = tuple(by_pipeline.values())
    now_had = by_pipeline if current or newest is None else _checkpoint_dirs(conn, result.job_id, newest)
    left_out_dirs, names_left_out = (), False
    if same_run and not current:
        left_out_dirs = tuple(d for pid, d in by_pipeline.items() if pid not in now_had)
        names_left_out = result.incarnation in {then.incarnation for then in left_out_configs(
            conn, result.job_id, result.run_id, newest, set(now_had))}
    return CleanupView(result, current, leftovers, dirs, tuple(d for d in dirs if os.path.isdir(d)),
                       tuple(now_had.values()), same_run, left_out_dirs, names_left_out)


def _checkpoint_dirs(conn, job_id: str, incarnation: int) -> dict[int, str]:
    return dict(conn.execute(select(s.pipelines.c.pipeline_id, s.pipelines.c.checkpoint_dir).where(and_(
        s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == incarnation))).all())


def apply_cleanup(store: Store, epoch: int, actor: str, result, effects: list[CleanupEffect],
                  kill_attempt: Callable[[Any], None], history_s: float = HISTORY_PERIOD_S) -> None:
    """Carry the effects out. An expiry's decision commits first (from then a resume is refused);
    the rest of the step runs in one transaction that has checked, through the door, that the
    result is still there and of the same run, and ends with the store write that records it."""
    decided = decided_for(result)
    if effects and isinstance(effects[0], DecideExpiry):
        _decide_expiry(store, epoch, actor, result)
        effects = effects[1:]
    with destructive_step(store, epoch, decided, _fence(result)) as opened:
        conn = opened.conn
        for effect in effects:
            match effect:
                case KillAttempt(attempt):
                    kill_attempt(attempt)
                case ReleaseSources():
                    release_sources(conn, result, actor, epoch)
                case RemoveCheckpoints(paths, with_job_root):
                    _remove_checkpoints(result, owned_paths(decided, paths), with_job_root)
                case MarkClean(removed, newer):
                    conn.execute(update(s.job_results).where(and_(
                        _key(result), s.job_results.c.cleanup == CleanupState.DIRTY))
                        .values(cleanup=CleanupState.CLEAN, cleaned_at=store_now(conn)))
                    record_event(conn, "CLEANUP_DONE", actor, result.job_id, result.incarnation, epoch,
                                 run_id=result.run_id,
                                 removed=list(removed), newer_incarnation=newer)
                case Forget(whole_run):
                    if whole_run:
                        forget_job(conn, result.job_id, result.incarnation)
                    else:
                        forget_result(conn, result.job_id, result.incarnation)
                    record_event(conn, "HISTORY_EXPIRED", actor, result.job_id, result.incarnation, epoch,
                                 run_id=result.run_id)
                case KeepForLeftOut():
                    # One history period from now, each time (outside review of 642a2cc/2e93916, F5: the
                    # result's own expires_at - created_at grew by each keep, doubling the period).
                    period = max(60.0, history_s)
                    conn.execute(update(s.job_results).where(_key(result)).values(
                        expires_at=store_now(conn) + period))
                    log.info("job %s incarnation %s: its result kept %.0f s more, its config names a pipeline "
                             "left out since", result.job_id, result.incarnation, period)


def _key(result):
    return and_(s.job_results.c.job_id == result.job_id, s.job_results.c.incarnation == result.incarnation)


def _decide_expiry(store: Store, epoch: int, actor: str, result) -> None:
    """The expiry's commit point: in one leader transaction, with the job row locked against a
    resume, check that the result is still the job's current incarnation and mark it EXPIRING.
    A resume that got in first moved the incarnation on: the expiry is overruled."""
    fence = result_of_run(CleanupState.CLEAN, CleanupState.EXPIRING)
    with destructive_step(store, epoch, decided_for(result), fence) as opened:
        if not current_run(opened.job, decided_for(result)):
            raise ExpiryOverruled(f"incarnation {result.incarnation} is no longer the job's current one")
        opened.conn.execute(update(s.job_results).where(_key(result)).values(cleanup=CleanupState.EXPIRING))
        record_event(opened.conn, "EXPIRY_DECIDED", actor, result.job_id, result.incarnation, epoch,
                     run_id=result.run_id)


def _remove_checkpoints(result, paths: tuple[str, ...], with_job_root: bool) -> None:
    """Remove pipeline directories; ``with_job_root``: the whole run's too (savepoints and
    set-aside copies beside them). Every path is the result's own run's: a new run of the job
    id lives in a directory of its own (``store/runs.py``), which this never reaches."""
    for path in paths:
        if not with_job_root:     # a cleanup that cannot remove them fails, and is retried
            if os.path.isdir(path):
                shutil.rmtree(path)
            continue
        shutil.rmtree(path, ignore_errors=True)
        root = os.path.dirname(path.rstrip("/"))
        if result.run_id and os.path.basename(root) == result.run_id:
            shutil.rmtree(root, ignore_errors=True)          # <job>/<run>: this run's alone
            _remove_if_empty(os.path.dirname(root))          # <job>: only when no run is left in it
        elif not result.run_id and os.path.basename(root) == result.job_id:
            _remove_legacy_run(root, path)


def _remove_legacy_run(job_root: str, path: str) -> None:
    """A job submitted before runs kept its pipelines in the job's directory itself: take its
    savepoints and set-aside copies, never a newer run's directory beside them."""
    name = os.path.basename(path.rstrip("/"))
    shutil.rmtree(os.path.join(job_root, "savepoints"), ignore_errors=True)
    for entry in os.scandir(job_root) if os.path.isdir(job_root) else ():
        if entry.name.startswith(name + ".") and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
    _remove_if_empty(job_root)


def _remove_if_empty(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass
