"""The savepoint a resume names (``seatide resume JOB --from N``), checked before anything is decided.

A savepoint is the state of the whole job at one point (``store/savepoint_scope.py``). The resume that
names one is refused at once, whatever its fallback, when that state cannot be restored: ``--fallback
fresh`` starts over a pipeline whose checkpoint cannot be used, it never turns a resume from a savepoint
into something else (outside review 9, F1 and F3). Each refusal names the savepoint, the job and the
savepoints the run has, with the way on:

* no such savepoint in the job's current run: no id, a checkpoint's id, one that did not complete, one
  an earlier run of the job id took (``resume_job``'s ``first`` incarnation);
* a copy of a pipeline it holds is gone from the data directory, or unreadable: it holds no position
  to go on from (one written for other sources is the fallback's, as a changed config is);
* it is older than a fresh start (``--fallback fresh``) whose save modes destroyed a target its lineage
  had committed into (``store/dropped_output.py``): going on from its offsets would never write again
  the rows that lineage committed before it. That is what a backup from before that fresh start is
  refused for, and for the same reason: only a later savepoint, the latest checkpoint or a new fresh
  start has every row.
"""

from __future__ import annotations

import os
import time

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.dropped_output import Dropped, dropped_after
from seatide.store.job_ids import RestoreRefused
from seatide.store.paths import under
from seatide.store.release_line import last_release
from seatide.store.runs import spark_checkpoint_dir
from seatide.store.savepoint_scope import held, held_then, left_out, not_held_refused


def savepoint_dir(checkpoint_dir: str, savepoint_id: int) -> str:
    """<root>/savepoints/<id>/<pipeline> beside <root>/<pipeline>."""
    root, pipeline = os.path.split(checkpoint_dir.rstrip("/"))
    return under(root, "savepoints", str(int(savepoint_id)), pipeline)


def savepoints_of_run(conn, job, first: int) -> list:
    """The run's completed savepoints of the whole job (``left_out``), oldest first (``first``: the run's
    first incarnation, ``restore.run_first_incarnation``)."""
    c = s.checkpoints.c
    return [row for row in conn.execute(select(s.checkpoints).where(and_(
        c.job_id == job.job_id, c.kind == "SAVEPOINT", c.status == "COMPLETED", c.incarnation >= first))
        .order_by(c.checkpoint_id)) if not left_out(conn, row)]


def named_savepoint(conn, job, savepoint_id: int, first: int, pipelines: dict, plan=None):
    """The savepoint row ``--from savepoint_id`` restores, or ``RestoreRefused`` saying why it cannot.
    ``pipelines``: the job's current pipeline rows by id (their directories name the copies); one it holds
    that a later config left out is checked from its row then (``held_then``), as the resume restores it."""
    c = s.checkpoints.c
    row = conn.execute(select(s.checkpoints).where(and_(
        c.job_id == job.job_id, c.checkpoint_id == savepoint_id, c.kind == "SAVEPOINT", c.status == "COMPLETED",
        c.incarnation >= first))).first()
    if row is None:
        _refuse(conn, job, savepoint_id, first, _not_one(conn, job, savepoint_id, first), plan=plan)
    missing = left_out(conn, row)
    if missing:
        raise RestoreRefused(
            f"savepoint {savepoint_id} of job {job.job_id} is not a savepoint of the whole job: it does not hold "
            f"pipeline{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}, which had not finished (a "
            "pipeline whose batch fails while the stop with a savepoint waits for it is left out), so it cannot "
            f"restore the job as it was. Resume without --from (`seatide resume {job.job_id}`): every pipeline is "
            "restored from its own latest checkpoint, none loses or repeats a row")
    why = _copies_problem(conn, row, pipelines)
    if why is not None:
        _refuse(conn, job, savepoint_id, first, why, row, plan=plan)
    return row


def refuse_dropped_since(conn, job, savepoint, first: int, pipelines: dict, plan=None) -> None:
    """``RestoreRefused`` when a fresh start after ``savepoint`` destroyed what a lineage it holds committed."""
    found = _dropped_since(conn, job, savepoint, pipelines)
    if found is not None:
        pid, dropped = found
        _refuse(conn, job, savepoint.checkpoint_id, first, _older(pid, dropped), savepoint, dropped.incarnation, plan)


def unrestorable(conn, job, savepoint, first: int, pipelines: dict | None = None, plan=None) -> str | None:
    """Why a resume refuses ``--from`` this savepoint of the run (one ``savepoints_of_run`` lists), or None: a
    copy's problem or one written for other sources than ``plan``'s (the resume's, when known), a pipeline of
    the job it does not hold (``not_held_refused``), a destroying fresh start since, the sources released since.
    A refusal and a listing offer only savepoints a resume accepts (outside review of 7d56489..26756a7, F4, and
    of b5aba34..HEAD, R3: they offered ones the same check then refused). ``pipelines``: the job's current
    pipeline rows by id (read when not given)."""
    if pipelines is None:
        pipelines = current_pipelines(conn, job)
    why = _copies_problem(conn, savepoint, pipelines, plan) or not_held_refused(conn, job, savepoint, pipelines, plan)
    if why is not None:
        return why
    found = _dropped_since(conn, job, savepoint, pipelines)
    if found is not None:
        return _older(*found)
    released = last_release(conn, job, first)
    if released is not None and savepoint.incarnation <= released:
        return f"it was taken at or before incarnation {released}, whose sources were released"
    return None


def savepoint_refused(conn, job, savepoint) -> str | None:
    """``unrestorable`` for a completed savepoint of the job's current incarnation, which may also be one that is
    not of the whole job (``left_out``): what a listing says of it."""
    missing = left_out(conn, savepoint)
    if missing:
        return f"it does not hold pipeline{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}, which had not finished"
    return unrestorable(conn, job, savepoint, job.incarnation)


def current_pipelines(conn, job) -> dict:
    """The job's current incarnation's pipeline rows by id (their directories name the savepoints' copies)."""
    p = s.pipelines.c
    return {row.pipeline_id: row for row in conn.execute(select(s.pipelines).where(and_(
        p.job_id == job.job_id, p.incarnation == job.incarnation)))}


def _copies_problem(conn, savepoint, pipelines: dict, plan=None) -> str | None:
    """What makes the savepoint's copy of a pipeline it holds hold no position, or (``plan`` given) one the
    resume runs was written for other sources than its own: the first such, or None."""
    pipelines = {**held_then(conn, savepoint, pipelines), **pipelines}
    fits = {p.pipeline_id: p.fits for p in plan.pipelines} if plan is not None else {}
    for pid, batch in sorted((int(p), b) for p, b in held(savepoint).items()):
        if pid in pipelines and pipelines[pid].checkpoint_dir:
            copy = savepoint_dir(pipelines[pid].checkpoint_dir, savepoint.checkpoint_id)
            why = _copy_problem(copy, batch)
            if why is not None:
                return f"its copy of pipeline {pid} ({copy}) {why}, so it holds no position to go on from"
            if pid in fits and not fits[pid]((checkpoint_metadata(copy) or {}).get("fingerprint")):
                return f"its copy of pipeline {pid} was written for other sources than the config's (changed since)"
    return None


def _dropped_since(conn, job, savepoint, pipelines: dict) -> tuple[int, Dropped] | None:
    """The first pipeline it holds whose lineage's committed output a later fresh start destroyed, and how."""
    pipelines = {**held_then(conn, savepoint, pipelines), **pipelines}
    for pid, batch in sorted((int(p), b) for p, b in held(savepoint).items()):
        if pid not in pipelines or not pipelines[pid].checkpoint_dir or batch < 0:
            continue        # a pipeline it holds no batch of committed nothing to lose
        copy = savepoint_dir(pipelines[pid].checkpoint_dir, savepoint.checkpoint_id)
        try:
            lineage = (checkpoint_metadata(copy) or {}).get("lineage")     # checked by _copies_problem first
        except ValueError:
            continue
        dropped = dropped_after(conn, job.job_id, pid, lineage, _last_ran(conn, job.job_id, pid, lineage,
                                                                          savepoint.incarnation), copy)
        if dropped is not None:
            return pid, dropped
    return None


def _last_ran(conn, job_id: str, pipeline_id: int, lineage: str, taken: int) -> int:
    """The newest incarnation that ran ``lineage`` (a plain resume after the savepoint goes on with it)."""
    m, p = s.sink_manifests.c, s.pipelines.c
    decided = conn.execute(select(func.max(m.incarnation)).where(and_(
        m.job_id == job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0,
        m.transaction_id.like(f"T\\_%\\_{lineage}\\_%", escape="\\")))).scalar()
    began = conn.execute(select(func.max(p.incarnation)).where(and_(
        p.job_id == job_id, p.pipeline_id == pipeline_id, p.started_lineage == lineage))).scalar()
    return max(taken, decided or taken, began or taken)


def _older(pipeline_id: int, dropped: Dropped) -> str:
    at = f", at {_utc(dropped.at)} UTC," if dropped.at is not None else ""
    return (f"it is older than the fresh start of pipeline {pipeline_id} by incarnation {dropped.incarnation} "
            f"({dropped.writer}){at} which prepared target {dropped.target} with a save mode that destroys "
            "(DROP_DATA, RECREATE_SCHEMA or CUSTOM_PROCESSING) and emptied it: going on from the savepoint's offsets "
            "would never write again the rows committed before it (they are lost), and would write again those the "
            "fresh start wrote since")


def _copy_problem(copy: str, batch: int) -> str | None:
    """What makes a savepoint's copy of a pipeline, at ``batch`` (-1: before its first), hold no position."""
    if not os.path.isdir(copy):
        return "is missing"
    try:
        meta = checkpoint_metadata(copy)
    except ValueError as exc:
        return f"is unreadable: {exc}"
    if meta is None:
        return "holds no SeaTide checkpoint (seatide.json is missing)"
    if batch >= 0 and not os.path.isdir(os.path.join(spark_checkpoint_dir(copy), "offsets")):
        return "has no Spark offsets log"
    return None


def _not_one(conn, job, savepoint_id: int, first: int) -> str:
    """Why the job's run has no savepoint ``savepoint_id``, as far as its rows tell."""
    c = s.checkpoints.c
    found = conn.execute(select(c.kind, c.status, c.incarnation).where(and_(
        c.job_id == job.job_id, c.checkpoint_id == savepoint_id)).order_by(c.incarnation.desc())).first()
    if found is None:
        return f"job {job.job_id} has no savepoint {savepoint_id}"
    if found.incarnation < first:
        return (f"savepoint {savepoint_id} was taken by an earlier run of job id {job.job_id}, before it was "
                "submitted again: this run never had it")
    if found.kind != "SAVEPOINT":
        return f"{savepoint_id} is a checkpoint of job {job.job_id}, not a savepoint"
    return f"savepoint {savepoint_id} of job {job.job_id} did not complete ({found.status})"


def _refuse(conn, job, savepoint_id: int, first: int, why: str, named=None, since: int | None = None, plan=None):
    """``RestoreRefused``: why, then the run's other savepoints (only those from incarnation ``since`` on, when a
    fresh start there destroyed what older ones hold) and the plain resume."""
    pipelines = current_pipelines(conn, job)
    others = [r for r in savepoints_of_run(conn, job, first) if (named is None or r.checkpoint_id != named.checkpoint_id)
              and (since is None or r.incarnation >= since)]
    offered = [r for r in others if unrestorable(conn, job, r, first, pipelines, plan) is None]  # only what is accepted
    kind = "savepoints taken since that fresh start" if since is not None else \
        "other savepoints" if named is not None else "savepoints"
    if others and not offered:
        kind += f" that can be restored ({', '.join(str(r.checkpoint_id) for r in others)} cannot)"
    listed = ", ".join(f"{r.checkpoint_id} (taken {_utc(r.created_at)} UTC, incarnation {r.incarnation})"
                       for r in offered)
    ways = f"its {kind}: {listed}, name one of them, or" if offered else f"the job has no {kind}, so"
    raise RestoreRefused(
        f"cannot resume job {job.job_id} from savepoint {savepoint_id}: {why}. Nothing was recorded. The ways on "
        f"(`seatide checkpoints {job.job_id}` lists them): {ways} resume without --from (`seatide resume "
        f"{job.job_id}`), from every pipeline's latest checkpoint")


def _utc(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp))


__all__ = ["current_pipelines", "named_savepoint", "refuse_dropped_since", "savepoint_dir", "savepoint_refused",
           "savepoints_of_run", "unrestorable"]
