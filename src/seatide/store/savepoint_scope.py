"""What a savepoint holds, and what it says of the pipelines it does not hold (store/restore.py).

A savepoint is all or nothing, as in Flink and SeaTunnel: it holds every pipeline of its
incarnation that had not FINISHED (``left_out`` refuses any other). A pipeline it does not hold is
decided from the savepoint's own incarnation, never from the job's current one, and never by a
copy from ``savepoints/<id>/<pipeline>``, which that savepoint did not write (review 3, F1):

* FINISHED then: it stays FINISHED, as in Flink (a finished task restored from a savepoint stays
  finished). Restoring a savepoint rewinds the job to that point, and at that point its output was
  complete. A later incarnation that ran it again (its sources changed, a fresh start, a rewind to an
  older savepoint) committed rows after that point, as the pipelines the savepoint holds did: those are
  the abandoned branch's, for all of them alike (docs/operations.md, "Runs"), and starting this one over
  would write its rows again. Its sources must still be the ones it read then (``changed_sources``):
  changed since, it runs again from nothing, which is the fallback's to decide, and the refusal names
  the plain resume when a later run of it holds a checkpoint to go on from;
* not in the job when the savepoint was taken: the savepoint holds nothing of it, and it has run since
  (the run had it): refused likewise, the fallback's.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.changed_sources import changed_sources
from seatide.store.owed_moves import OwedMove
from seatide.store.states import PipelineStatus


def held(savepoint) -> dict[str, int]:
    """The pipelines the savepoint holds: {pipeline id as text: its newest batch, -1 for none}."""
    return json.loads(savepoint.source_offsets or "{}").get("pipelines", {})


def left_out(conn, savepoint) -> list[int]:
    """The pipelines of the savepoint's incarnation that it does not hold and that had not FINISHED.

    One that misses a pipeline still to run (its batch failed while the stop waited for it,
    ``runtime/driver.py``) is no savepoint of the job. Restoring the rest from it and that one from its
    own checkpoint (the other way out) would make the job's state at savepoint N depend on when it is
    named: that pipeline's checkpoint moves on with every later incarnation. So a resume refuses it, and
    no listing offers it; a plain resume restores every pipeline from its own checkpoint, which a stop
    leaves as the savepoint copied it."""
    saved = held(savepoint)
    p = s.pipelines.c
    return sorted(pid for pid, status in conn.execute(select(p.pipeline_id, p.status).where(and_(
        p.job_id == savepoint.job_id, p.incarnation == savepoint.incarnation)))
        if str(pid) not in saved and status != PipelineStatus.FINISHED)


def never_held(conn, job, pipeline_id: int, owed: OwedMove) -> OwedMove:
    """An owed copy from a savepoint that does not hold the pipeline (``left_out``, or one FINISHED then
    and run again since; accepted before it was refused) was never to be made: its directory was never
    written, every attempt failed to copy it, and the directory in place, never moved, is the pipeline's
    own checkpoint. It is planned again from there, like a fresh start no release forced, not carried on
    to fail again (nor left to ``--fallback fresh``)."""
    if owed.source is None:
        return owed
    named = os.path.basename(os.path.dirname(owed.source.rstrip("/")))      # <root>/savepoints/<id>/<pipeline>
    row = conn.execute(select(s.checkpoints).where(and_(
        s.checkpoints.c.job_id == job.job_id, s.checkpoints.c.kind == "SAVEPOINT",
        s.checkpoints.c.checkpoint_id == (int(named) if named.isdigit() else -1)))).first()
    if row is None or str(pipeline_id) in held(row):
        return owed
    return replace(owed, source=None, never_held=row.checkpoint_id)


def not_held(conn, job, savepoint) -> dict[int, tuple[str | None, int | None]]:
    """For each pipeline of the job since the savepoint that it does not hold: its fingerprint in the
    savepoint's incarnation (None: the job had no such pipeline then), and the first later incarnation,
    up to the current one, that was to run it (None: it stayed FINISHED)."""
    p = s.pipelines.c
    saved = held(savepoint)
    then = dict(conn.execute(select(p.pipeline_id, p.fingerprint).where(and_(
        p.job_id == job.job_id, p.incarnation == savepoint.incarnation))).all())
    ran = dict(conn.execute(select(p.pipeline_id, func.min(p.incarnation)).where(and_(
        p.job_id == job.job_id, p.incarnation > savepoint.incarnation, p.incarnation <= job.incarnation,
        p.status != PipelineStatus.FINISHED)).group_by(p.pipeline_id)).all())
    return {pid: (then.get(pid), ran.get(pid)) for pid in set(then) | set(ran) if str(pid) not in saved}


def finished_then(conn, savepoint, current: dict) -> dict:
    """The rows, in the savepoint's incarnation, of the pipelines it left out FINISHED that the current
    incarnation has no row of (a resume's config left them out since): decided from that row, they stay
    FINISHED, not taken for pipelines the resume adds (outside review 4, F4)."""
    p = s.pipelines.c
    saved = held(savepoint)
    return {row.pipeline_id: row for row in conn.execute(select(s.pipelines).where(and_(
        p.job_id == savepoint.job_id, p.incarnation == savepoint.incarnation, p.status == PipelineStatus.FINISHED)))
        if str(row.pipeline_id) not in saved and row.checkpoint_dir and row.pipeline_id not in current}


def held_then(conn, savepoint, current: dict) -> dict:
    """The rows, in the savepoint's incarnation, of the pipelines it holds that ``current`` (pipeline rows by id)
    has none of: a resume's config left them out since. The savepoint holds their copies, and a resume from it
    restores them from there as it does every pipeline it holds, its copy checked alike (outside review of
    7d56489..26756a7, F1: taken for pipelines the resume adds, they started from nothing and wrote again the
    rows they had committed up to the savepoint)."""
    p = s.pipelines.c
    saved = held(savepoint)
    return {row.pipeline_id: row for row in conn.execute(select(s.pipelines).where(and_(
        p.job_id == savepoint.job_id, p.incarnation == savepoint.incarnation)))
        if str(row.pipeline_id) in saved and row.checkpoint_dir and row.pipeline_id not in current}


def not_held_problem(job_id: str, savepoint_id: int, fingerprint_then: str | None, ran_since: int | None,
                     changed: str | None) -> str | None:
    """Why ``--from`` the savepoint cannot restore a pipeline it does not hold, or None: it stays FINISHED, as
    it was then. ``changed``: why its sources are not those it had then (``changed_sources``), or None."""
    if fingerprint_then is None:
        return (f"savepoint {savepoint_id} was taken before the job had this pipeline: it holds nothing of it, and "
                f"the rows it committed since would be written again; resume without --from (`seatide resume "
                f"{job_id}`), which goes on from its own latest checkpoint")
    if changed is None:
        return None
    if ran_since is None:
        return changed
    return (f"{changed}, and savepoint {savepoint_id} holds nothing of it (it had FINISHED then); incarnation "
            f"{ran_since} ran it again since: resume without --from (`seatide resume {job_id}`) to go on from its "
            "own latest checkpoint")


def not_held_refused(conn, job, savepoint, pipelines: dict, plan=None) -> str | None:
    """Why ``--from`` the savepoint is refused for a pipeline of the job it does not hold (``not_held_problem``,
    as ``restore._plan_pipelines`` asks it), the first such, or None. ``pipelines``: the job's current rows by
    id; ``plan``: the resume's (its pipelines are those asked; without it, the current ones, whose sources'
    change is then not known). A refusal and a listing offer no savepoint this refuses (outside review of
    b5aba34..HEAD, R3)."""
    asked = {p.pipeline_id: p for p in plan.pipelines} if plan is not None else dict.fromkeys(pipelines)
    for pid, (then, ran_since) in sorted(not_held(conn, job, savepoint).items()):
        if pid not in asked or pid not in pipelines or not pipelines[pid].checkpoint_dir:
            continue        # a pipeline the resume adds: restore._added decides it, not the savepoint
        changed = changed_sources(asked[pid], then, True) if then and asked[pid] is not None else None
        if not_held_problem(job.job_id, savepoint.checkpoint_id, then, ran_since, changed) is not None:
            return (f"it was taken before the job had pipeline {pid}: it holds nothing of it" if then is None else
                    f"pipeline {pid}, which it does not hold, {changed}")
    return None


__all__ = ["finished_then", "held", "held_then", "left_out", "never_held", "not_held", "not_held_problem",
           "not_held_refused"]
