"""Resuming a job: a new incarnation that continues from checkpoints (or a savepoint).

``resume_job`` is user intent, like a submission: any process may call it. It checks,
before anything runs, that every pipeline still to run has a checkpoint that exists, is
readable and was written for the same pipeline (a fingerprint of its sources, in
order). What happens otherwise is explicit: ``restore.fallback = fail`` (default)
refuses with a message per pipeline; ``fresh`` starts those pipelines over and says so
in the event log. Nothing ever falls back silently.

A resume only decides; the new incarnation's driver moves the directories. A move it surely
never made (the incarnation ended before its driver ran) is owed by the next resume, which carries
a release's fresh start or a savepoint's copy on rather than restore what is still in place
(``store/owed_moves.py``). Nothing taken before the job's last release is restored
(``store/release_line.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from sqlalchemy import and_, func, insert, or_, select, update

from seatide.store import schema as s
from seatide.store.batch_mode import savepoint_mode_change
from seatide.store.changed_sources import changed_sources
from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.clock import read_store_now
from seatide.store.db import Store, record_event
from seatide.store.decided_batches import decided_in_place, lost_lineage
from seatide.store.job_ids import RestoreRefused
from seatide.store.fresh_made import checkpointed, made_empty as made_empty_note, unreadable_mark
from seatide.store.jobs import JobNotFound, JobRefused
from seatide.store.owed_moves import (OwedMove, batch_in_place, carried_copy, carried_fresh, decided_moves,
                                      owed_copy_problem, owed_moves, replanned)
from seatide.store.release_line import last_release, in_place_problem, refuse_savepoint_before
from seatide.store.resumable import check_resumable, refuse_if_expiring, refuse_released, release_retried
from seatide.store.runs import pipeline_dir, spark_checkpoint_dir
from seatide.store.left_out import left_out_note, left_out_refusal
from seatide.store.named_savepoint import named_savepoint, refuse_dropped_since, savepoint_dir, savepoints_of_run
from seatide.store.savepoint_scope import finished_then, held, held_then, never_held, not_held, not_held_problem
from seatide.store.started_over import started_over
from seatide.store.sessions import REQUEST_KEEPS_TRYING_S, again_on_new_session
from seatide.store.states import ATTEMPT_LIVE, AttemptState, JobStatus, PipelineStatus
from seatide.store.unusable_checkpoints import PositionsAsked, refusal, resume_command
from seatide.timeouts import Timeouts

@dataclass
class PipelinePlan:
    pipeline_id: int
    checkpoint_dir: str
    fingerprint: str
    finished: bool
    problem: str | None = None      # why its checkpoint cannot be used
    # the newest batch its checkpoint (or savepoint) holds, as the store recorded it: Spark's own
    # log may lack it (runtime/spark_checkpoint.py, restore_point)
    from_batch: int | None = None
    restore_from: str | None = None     # a savepoint's directory its driver copies in
    carried: OwedMove | None = None     # an earlier incarnation's decision, carried on (store/owed_moves.py)
    replanned: OwedMove | None = None   # an earlier fresh start no release forced, planned again instead
    released: bool = False              # it starts over because its sources' positions were released
    note: str | None = None             # what its restore in place is, for the answer (store/fresh_made.py)
    had_until: int | None = None        # a pipeline a resume's config left out since this incarnation (``_added``)
    rewrites: bool = False      # started over, it writes again rows it committed: its problem names the way on
    sources_changed: bool = False       # its problem: its sources are not its checkpoint's (store/left_out.py)

    @property
    def decided_fresh(self) -> bool:
        """It starts over by a decision made before (a carried one): no fallback is asked again."""
        return self.carried is not None and self.carried.source is None

    def fresh_entry(self) -> dict:
        """What ``jobs.restore`` and the RESTORE_FALLBACK_FRESH event say of its fresh start."""
        entry = {"pipeline": self.pipeline_id, "problem": self.problem}
        if self.decided_fresh:
            entry["reason"] = self.carried.reason      # the first reason, kept through any number of carries
        owed = self.carried if self.decided_fresh else self.replanned
        if owed is not None and owed.source is None and owed.never_held is None:
            entry["began"] = owed.decided_by           # one decision, one save-mode scope (runtime/driver.py)
        if self.released:
            entry["released"] = True
        return entry


def inspect_checkpoint(path: str, fits, had_checkpoints: bool) -> str | None:
    """None when ``path`` can restore a pipeline whose ``fits(fingerprint)`` accepts the checkpoint's
    fingerprint (``plan.dag.Pipeline.fits``; a fingerprint: that one only); else what is wrong."""
    if isinstance(fits, str):
        fits = fits.__eq__
    if not os.path.isdir(path):
        return (f"its checkpoint directory {path} is missing" if had_checkpoints else None)
    try:
        meta = checkpoint_metadata(path)
    except ValueError as exc:
        return f"its checkpoint metadata {exc}"
    if meta is None:
        return f"{path} holds no SeaTide checkpoint (seatide.json is missing)" if had_checkpoints else None
    if not fits(meta.get("fingerprint")):
        return ("its checkpoint was written for a different pipeline (the sources or their options "
                "changed: a source added, removed, reordered or reconfigured)")
    if had_checkpoints and not os.path.isdir(os.path.join(spark_checkpoint_dir(path), "offsets")):
        return f"its checkpoint in {path} has no Spark offsets log"
    return None


def resume_job(store: Store, job_id: str, *, plan, text: str, variables: dict, savepoint_id: int | None = None,
               fallback: str | None = None, pinned_worker: str | None = None, actor: str = "client",
               timeouts: Timeouts = Timeouts(), check_positions=None, command: str | None = None) -> list[str]:
    """Start the job's next incarnation from its latest checkpoints, or from a savepoint. Returns, for its
    answer, the decisions it carried on or re-planned (``jobs.restore``'s ``carried``), then its fresh starts,
    then the sources whose servers its position check could not reach (``PositionsAsked.not_checked``).

    The new incarnation's first driver starts only once every earlier attempt's driver is surely gone, by
    the leader's rule for a retry (``coordinator/reconcile.py``): a resume never adds one beside a live one.

    ``check_positions(job, plan, [(pipeline id, directory, recorded batch)])`` answers (``PositionsAsked``)
    which pipelines restored in place have their sources' position gone from their servers, each with why
    (``coordinator/position_check.positions_gone``), and which sources it could not ask: such a checkpoint cannot be used, as a missing one cannot; resumed from
    it, the pipeline could not keep exactly-once. So it is refused, nothing recorded, or the fallback
    ``fresh`` starts it over (a new snapshot from its sources' startup.mode) while the others resume.
    ``command``: the resume as asked (``unusable_checkpoints.resume_command``), which a refusal's way on repeats."""
    fallback = fallback or plan.job.env.restore_fallback

    def read_state():
        # Reads only, some of them of checkpoint directories between statements: a loaded machine can keep the
        # session idle past the store's limit, and nothing is written yet, so it is taken again whole
        # (store/sessions.py; a CPU-hogged test run met it).
        with store.read() as conn:
            job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
            if job is None:
                raise JobNotFound(f"no job with id {job_id}")
            check_resumable(conn, job, timeouts)
            old = {p.pipeline_id: p for p in conn.execute(select(s.pipelines).where(and_(
                s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == job.incarnation)))}
            first = run_first_incarnation(conn, job)
            savepoint = named_savepoint(conn, job, savepoint_id, first, old, plan) if savepoint_id is not None else None
            if savepoint is not None:
                refuse_dropped_since(conn, job, savepoint, first, old, plan)
            released = last_release(conn, job, first)
            completed, made_empty = checkpointed(conn, job, old, first, savepoint is None and job.release is None)
            decided = decided_in_place(conn, job, old, first, plan.job.env.micro_batch)   # store/decided_batches.py
            # A savepoint named now and a release both say what each directory becomes, owed move or
            # not: the marks owed_moves reads are not read then (an unreadable one blocks nothing).
            owed = owed_moves(conn, job, old) if savepoint is None and job.release is None else {}
            owed = {pid: never_held(conn, job, pid, o) for pid, o in owed.items()}
            # A re-planned fresh start restores the directory in place: its batch is on no fresh start's row.
            in_place = {pid: batch_in_place(conn, job_id, pid, o, first) for pid, o in owed.items() if o.source is None}
            unheld = not_held(conn, job, savepoint) if savepoint is not None else {}
            then = finished_then(conn, savepoint, old) if savepoint is not None else {}   # left out since: FINISHED
            # left out since, held: restored from its copy; only those this config has (one it leaves out is not run,
            # as the latest incarnation did not run it)
            then.update({pid: row for pid, row in (held_then(conn, savepoint, old) if savepoint is not None else {}).items()
                         if pid in {p.pipeline_id for p in plan.pipelines}})
            in_run = _run_until(conn, job, first)
            retried = release_retried(conn, job) if job.release is not None else None
            return (job, old, first, savepoint, released, completed, made_empty, decided, owed, in_place, unheld,
                    then, in_run, retried)

    (job, old, first, savepoint, released, completed, made_empty, decided, owed, in_place, unheld, then, in_run,
     retried) = again_on_new_session(read_state, what=f"the resume of {job_id}", within=REQUEST_KEEPS_TRYING_S)
    if job.release is not None:
        refuse_released(job, fallback, retried)
    if savepoint is not None:
        refuse_savepoint_before(job_id, savepoint, released)
    pipelines = _plan_pipelines(plan, {**then, **old}, completed, savepoint, owed, released, in_place, decided_moves(job),
                                made_empty, decided, unheld, in_run)
    gone = sorted(set({**then, **old}) - {p.pipeline_id for p in plan.pipelines})     # store/left_out.py
    if job.release is not None:
        for p in pipelines:        # fallback fresh: every unfinished pipeline starts over
            if not p.finished:
                p.problem = "its sources were released (cancel and release): it starts over with a new snapshot"
                p.carried, p.replanned, p.released = None, None, True
    if all(p.finished for p in pipelines) and gone:
        # the pipelines it leaves out are not FINISHED: they are the resume's work (review F6)
        raise RestoreRefused(refusal(job_id, [], PositionsAsked(), command, left_out_refusal(
            job_id, gone, command or resume_command(job_id), finished=True)))
    if all(p.finished for p in pipelines):
        # e.g. a stop with savepoint that came after the data ran out: the job's work is done
        raise JobRefused(f"job {job_id} ended {job.status} with every pipeline FINISHED; there is nothing "
                         "to resume (submit it again to rerun it)")
    in_place = [(p.pipeline_id, p.checkpoint_dir, p.from_batch) for p in pipelines
                if not p.finished and not p.problem and p.restore_from is None]
    asked = check_positions(job, plan, in_place) if check_positions is not None and in_place else PositionsAsked()
    for p in pipelines:
        if p.pipeline_id in asked.gone:     # its checkpoint cannot be used: decided below like any other such
            p.problem = asked.gone[p.pipeline_id]
    problems = [p for p in pipelines if p.problem and not p.decided_fresh]
    if (problems or gone) and fallback != "fresh":
        raise RestoreRefused(refusal(job_id, problems, asked, command, left_out_refusal(
            job_id, gone, command or resume_command(job_id), problems) if gone else None))
    left = [left_out_note(pid, {**then, **old}[pid].checkpoint_dir) for pid in gone]
    return _new_incarnation(store, job, plan, text, variables, pipelines, savepoint, fallback, pinned_worker, actor,
                            released, left) + asked.not_checked()


def run_first_incarnation(conn, job) -> int:
    """The first incarnation of the job's current run: the rows of earlier incarnations are an
    earlier run's while that run's history is kept (a job id may be submitted again once its
    run was cleaned up). An earlier run's last incarnation has its result (that is what let
    the id be submitted again), with its run id (or none, from before runs)."""
    if job.run_id is None:
        return 1
    r = s.job_results.c
    last = conn.execute(select(func.max(r.incarnation)).where(and_(
        r.job_id == job.job_id, or_(r.run_id.is_(None), r.run_id != job.run_id)))).scalar()
    return (last or 0) + 1


def _run_until(conn, job, first: int) -> dict[int, int]:
    """Each pipeline the run has had, with a checkpoint directory: the last incarnation that had it."""
    p = s.pipelines.c
    return dict(conn.execute(select(p.pipeline_id, func.max(p.incarnation)).where(and_(
        p.job_id == job.job_id, p.incarnation >= first, p.incarnation <= job.incarnation, p.checkpoint_dir != ""))
        .group_by(p.pipeline_id)).all())


def _plan_pipelines(plan, old: dict, completed: set[int], savepoint, owed: dict[int, OwedMove],
                    released: int | None, in_place: dict[int, int | None], decided: set[int],
                    made_empty: dict[int, int], decided_batches: dict[int, int], unheld: dict,
                    in_run: dict[int, int]) -> list[PipelinePlan]:
    result = []
    saved = {"pipelines": held(savepoint)} if savepoint is not None else {}
    for pipeline in plan.pipelines:
        previous = old.get(pipeline.pipeline_id)
        fingerprint = pipeline.fingerprint()
        if previous is None or not previous.checkpoint_dir:   # "": added by an earlier version, never run
            result.append(_added(pipeline, old, in_run.get(pipeline.pipeline_id)))
            continue
        in_savepoint = savepoint is not None and str(pipeline.pipeline_id) in saved["pipelines"]
        if savepoint is not None and not in_savepoint:
            # Decided from the savepoint's incarnation, never copied (store/savepoint_scope.py): FINISHED
            # then, it stays FINISHED, its output complete at that point (simulation, seed 24)
            then, ran_since = unheld.get(pipeline.pipeline_id, (None, None))
            problem = not_held_problem(savepoint.job_id, savepoint.checkpoint_id, then, ran_since,
                                       then and changed_sources(pipeline, then, True))   # changed: it runs again
            result.append(PipelinePlan(pipeline.pipeline_id, previous.checkpoint_dir, fingerprint, problem is None,
                                       problem, rewrites=problem is not None and (then is None or ran_since is not None)))
            continue
        finished = previous.status == PipelineStatus.FINISHED and savepoint is None
        changed = changed_sources(pipeline, previous.fingerprint, finished)       # finished, it starts over
        entry = PipelinePlan(pipeline.pipeline_id, previous.checkpoint_dir, fingerprint, finished and not changed)
        # A savepoint named now is the newer word: it passed the release line, so it owes nothing
        # to a release either (release_line.refuse_savepoint_before).
        owes = owed.get(pipeline.pipeline_id) if savepoint is None else None
        if owes is not None and owes.unreadable and not entry.finished:
            entry.problem = owes.unreadable      # made or not, unknown: refused, or --fallback fresh
        elif owes is not None and owes.carried_fresh and not entry.finished:
            entry.carried, entry.released = owes, True
            entry.problem = carried_fresh(owes)
        elif changed is not None:
            entry.problem, entry.sources_changed = changed, True
        elif not entry.finished:
            if owes is not None and owes.source is not None:
                # The savepoint's copy it owed, at the batch that resume recorded: its driver never
                # ran, so nothing moved that row since, and a savepoint with no batch of it has none.
                # Checked as that savepoint named again is: it held the pipeline, so it must be there.
                entry.carried, entry.restore_from, entry.from_batch = owes, owes.source, previous.last_batch_id
                entry.problem = owed_copy_problem(owes, inspect_checkpoint(owes.source, pipeline.fits, True) or
                    savepoint_mode_change(owes.source, entry.from_batch, plan.job.env.micro_batch))
            elif savepoint is not None:
                source = entry.restore_from = savepoint_dir(previous.checkpoint_dir, savepoint.checkpoint_id)
                saved_batch = saved["pipelines"][str(pipeline.pipeline_id)]
                # the savepoint holds it (any other was decided above): its copy must be there
                entry.problem = inspect_checkpoint(source, pipeline.fits, True) or \
                    savepoint_mode_change(source, saved_batch, plan.job.env.micro_batch)
                entry.from_batch = None if saved_batch < 0 else saved_batch
            else:
                # owes here: a fresh start no release forced, planned again from the directory in place
                entry.replanned = owes
                entry.from_batch = previous.last_batch_id if owes is None else in_place.get(pipeline.pipeline_id)
                entry.problem = inspect_checkpoint(previous.checkpoint_dir, pipeline.fits,
                                                   pipeline.pipeline_id in completed) or \
                    lost_lineage(previous.checkpoint_dir, decided_batches.get(pipeline.pipeline_id), plan.job.env.micro_batch)
                if entry.problem is not None:
                    entry.problem += unreadable_mark(previous.checkpoint_dir, entry.problem) or ""
                if entry.problem is None and (released is not None or pipeline.pipeline_id in decided):
                    entry.problem = in_place_problem(previous.checkpoint_dir, released, owes)
                if entry.problem is None and pipeline.pipeline_id in made_empty:
                    entry.note = made_empty_note(made_empty[pipeline.pipeline_id])
        result.append(entry)
    return result


def _added(pipeline, old: dict, had_until: int | None) -> PipelinePlan:
    """A pipeline this config adds to the job: it starts from nothing, as a new operator restored from a
    Flink savepoint that holds no state for it does, in a checkpoint directory of its own beside the
    others' (as a submission makes them; review 3, F2). Nothing to move: its driver makes the directory
    as a first attempt does, and a later resume finds it as it would a submitted pipeline's. One the run
    had before (a resume's config dropped it since) ran and committed rows: started from nothing, it
    writes them again, which only the fallback may decide."""
    run_root = os.path.dirname(next(p.checkpoint_dir for p in old.values() if p.checkpoint_dir).rstrip("/"))
    entry = PipelinePlan(pipeline.pipeline_id, pipeline_dir(run_root, pipeline.pipeline_id), pipeline.fingerprint(),
                         False)
    if had_until is None:
        entry.note = "it is new (the job had no such pipeline): it starts from nothing, as at a submission"
    else:
        entry.problem = (f"the job had it until incarnation {had_until} (a resume's config left it out since): "
                         "started from nothing, it would write again the rows it committed then; a way on that "
                         "writes none twice: leave it out again (a config without it; its checkpoint stays in place)")
        entry.had_until, entry.rewrites = had_until, True
    return entry


def _new_incarnation(store: Store, job, plan, text, variables, pipelines, savepoint, fallback, pinned_worker,
                     actor, released: int | None, left: list[str]) -> list[str]:
    # Only decisions here: the driver of the new incarnation moves the directories
    # (``runtime/checkpoint_move.prepare_checkpoint``), after this compare-and-set has made the resume real.
    fresh, restored, prepare, carried = [], [], {}, []
    for p in pipelines:
        if p.finished:
            continue
        if p.problem:            # fallback == fresh (or decided before): start over, and keep the old copy
            fresh.append(p.fresh_entry())
            prepare[str(p.pipeline_id)] = None
        elif p.restore_from is not None:
            prepare[str(p.pipeline_id)] = p.restore_from
            restored.append(p.pipeline_id)
        else:
            restored.append(p.pipeline_id)
        if p.carried is not None and (p.decided_fresh or not p.problem):
            carried.append(f"pipeline {p.pipeline_id}: {p.problem or carried_copy(p.carried)}")
        if p.replanned is not None:
            carried.append(f"pipeline {p.pipeline_id}: {replanned(p.replanned, p.problem)}")
        if p.note is not None and not p.problem:
            carried.append(f"pipeline {p.pipeline_id}: {p.note}")
    carried += left     # pipelines its config leaves out: not run, kept in place (store/left_out.py)
    from seatide.plan.outline import outline_json   # the caller has the config's modules loaded

    env = plan.job.env
    incarnation = job.incarnation + 1
    source = f"savepoint {savepoint.checkpoint_id}" if savepoint is not None else f"{job.job_id}@{job.incarnation}"
    owed_copy = [p.restore_from for p in pipelines if p.carried is not None and p.restore_from and not p.problem]
    if savepoint is None and owed_copy:     # <root>/savepoints/<id>/<pipeline>: named by the savepoint, not the chain
        source = f"savepoint {os.path.basename(os.path.dirname(owed_copy[0]))}, as {job.job_id}@{job.incarnation} owed"
    with store.write() as conn:
        # Compare-and-set on the row it locks: a leader's decision about the old incarnation
        # (applied under the same lock, coordinator/effects.py) lands before this or not at all.
        # ``release`` too: once the leader has decided a release, a resume waits for it to be done
        # (coordinator/release.py), so the slot it drops is never the new incarnation's.
        query = select(s.jobs.c.incarnation, s.jobs.c.status, s.jobs.c.current_attempt, s.jobs.c.release).where(
            s.jobs.c.job_id == job.job_id)
        current = conn.execute(query if store.is_sqlite else query.with_for_update()).first()
        if current is None or tuple(current) != (job.incarnation, job.status, job.current_attempt, job.release):
            raise JobRefused(f"job {job.job_id} changed while resuming; try again")
        refuse_if_expiring(conn, job)
        now = read_store_now(conn)
        conn.execute(update(s.jobs).where(and_(s.jobs.c.job_id == job.job_id,
                                               s.jobs.c.incarnation == job.incarnation)).values(
            incarnation=incarnation, config=text, variables=json.dumps(variables), outline=outline_json(plan.job),
            mode=env.mode, desired="RUN", status=JobStatus.CREATED, retries_used=0, max_retries=env.retry_times,
            retry_interval_s=float(env.retry_interval_s), next_attempt_at=None, current_attempt=None,
            pinned_worker=pinned_worker, restored_from=source,
            restore=json.dumps({"from": source, "fallback": fallback, "fresh": fresh, "prepare": prepare,
                                "carried": carried, "release_incarnation": released}),  # release_line.py
            error_msg=None,
            checkpoint_interval_ms=env.checkpoint_interval_ms, stale_after_s=env.stale_after_s,
            on_stale=env.on_stale, stale_since=None, checkpoints_retained=env.checkpoints_retained,
            progress_timeout_s=env.progress_timeout_s, on_hung=env.on_hung, hung_since=None, updated_at=now,
            finished_at=None, release=None, released_at=None))
        for p in pipelines:
            conn.execute(insert(s.pipelines).values(
                job_id=job.job_id, incarnation=incarnation, pipeline_id=p.pipeline_id,
                status=PipelineStatus.FINISHED if p.finished else PipelineStatus.CREATED, fingerprint=p.fingerprint,
                checkpoint_dir=p.checkpoint_dir, rows_read=0, rows_written=0, idle=False,
                last_batch_id=None if p.problem else p.from_batch, finished_at=now if p.finished else None))
        # A killed incarnation's attempt never recorded its end. It is put down if its worker
        # still sees it (kill_requested), and the leader starts the new incarnation's driver only
        # once it is surely gone (reconcile.py: earlier attempts are waited for like a retry's).
        conn.execute(update(s.attempts).where(and_(
            s.attempts.c.job_id == job.job_id, s.attempts.c.incarnation == job.incarnation,
            s.attempts.c.state.in_(sorted(ATTEMPT_LIVE)))).values(
            state=AttemptState.LOST, kill_requested=True, error="superseded by a resume"))
        record_event(conn, "JOB_RESUMED", actor, job.job_id, incarnation, previous_status=job.status,
                     previous_incarnation=job.incarnation, restored_from=source, pipelines_restored=restored,
                     **({"carried": carried} if carried else {}))
        for entry in fresh:
            record_event(conn, "RESTORE_FALLBACK_FRESH", actor, job.job_id, incarnation, level="WARNING", **entry)
    return carried + started_over(pipelines)


def savepoint_ids(store: Store, job_id: str) -> list[int]:
    """The job's current run's completed savepoints of the whole job (``left_out``), oldest first."""
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
        if job is None:
            return []
        return [row.checkpoint_id for row in savepoints_of_run(conn, job, run_first_incarnation(conn, job))]


def latest_savepoint_id(store: Store, job_id: str) -> int | None:
    return (savepoint_ids(store, job_id) or [None])[-1]
