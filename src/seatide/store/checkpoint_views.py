"""Read models of a job's checkpoints: counts, the newest, health, and the history.

Shared by the REST API, the CLI, the web UI, the metrics and ``seatide run``; computed from
the store alone, on the store's clock (``store/clock.py``), as the leader judges: a reader
on a host whose clock disagrees with the store's still reports what the metrics report
(issue 30, finding 17).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.jobs import job_view
from seatide.store.named_savepoint import savepoint_refused
from seatide.store.states import AttemptState, JobStatus, PipelineStatus


def iso(ts: float | None) -> str | None:
    # time.strftime of a struct: half the cost of a datetime's, and a list makes thousands.
    return None if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _checkpoint_key(job):
    return and_(s.checkpoints.c.job_id == job.job_id, s.checkpoints.c.incarnation == job.incarnation)


def checkpoint_stats(conn: Connection, job, pipelines) -> dict:
    """A job's checkpoint counts and its newest completed checkpoint (or savepoint): from its
    pipelines' rows, which keep their totals and newest checkpoint (store/schema.py), and its
    savepoints. Nothing counts checkpoint rows or walks a job's checkpoints."""
    savepoints = savepoints_of(conn, s.jobs.c.job_id == job.job_id)
    return stats_of(pipelines, savepoints.get((job.job_id, job.incarnation), []))


class Checkpoint(NamedTuple):
    """What a summary shows of one checkpoint."""
    checkpoint_id: int
    created_at: float
    duration_ms: int | None
    rows: int | None


def pipeline_checkpoint(p) -> Checkpoint | None:
    """A pipeline's newest COMPLETED checkpoint, from the facts its row keeps (revisions 0008, 0010)."""
    if p.last_checkpoint_id is None:
        return None
    return Checkpoint(p.last_checkpoint_id, p.last_checkpoint_at, p.last_checkpoint_duration_ms,
                      p.last_checkpoint_rows)


def stats_of(pipelines, savepoints: list) -> dict:
    """Savepoints are the job's own rows (the pipelines' totals leave them out): counted here,
    and the newest of them is the latest when it is newer than every pipeline's checkpoint.
    One pass (a list makes a thousand of these)."""
    completed = failed = restored = 0
    newest = None
    for p in pipelines:
        completed += p.checkpoints_completed
        failed += p.checkpoints_failed
        restored += p.restores
        if p.last_checkpoint_id is not None and (newest is None or p.last_checkpoint_id > newest.last_checkpoint_id):
            newest = p
    latest = None if newest is None else pipeline_checkpoint(newest)
    for savepoint in savepoints:
        if latest is None or savepoint.checkpoint_id > latest.checkpoint_id:
            latest = savepoint
    return {"completed": completed + len(savepoints), "failed": failed, "restored": restored, "latest": latest}


def savepoints_of(conn: Connection, where) -> dict[tuple[str, int], list[Checkpoint]]:
    """The completed savepoints of the current incarnations of the jobs ``where`` selects: a
    handful of rows, found by a partial index (``ix_checkpoints_savepoints``)."""
    c = s.checkpoints.c
    found: dict[tuple[str, int], list[Checkpoint]] = {}
    for r in conn.execute(select(c.job_id, c.incarnation, c.checkpoint_id, c.created_at, c.duration_ms, c.rows)
                          .join(s.jobs, s.of_current_incarnation(s.checkpoints))
                          .where(where, c.kind == "SAVEPOINT", c.status == "COMPLETED")).all():
        found.setdefault((r.job_id, r.incarnation), []).append(Checkpoint(*r[2:]))
    return found


def all_idle(pipelines) -> bool:
    """Whether the job has running pipelines and every one of them has caught up with its sources."""
    running = [p for p in pipelines if p.status == PipelineStatus.RUNNING]
    return bool(running) and all(p.idle for p in running)


def stale_window_opened(attempt, pipelines) -> float | None:
    """When the attempt's pipelines (re)started, while they have data pending; else None: the
    watchdog's window, the leader's (``coordinator/reconcile.py``) and every view's.

    Staleness and hangs are counted from there, not from the driver's launch: starting
    Spark is not a stalled checkpoint, and a pipeline caught up with its sources (IDLE)
    is waiting, not stuck. A retried attempt's pipeline rows still carry its predecessor's
    last checkpoint: the window opens only once this attempt has started them."""
    if attempt is None or attempt.state != AttemptState.RUNNING:
        return None
    running = [p for p in pipelines if p.status == PipelineStatus.RUNNING]
    if not running or all(p.idle for p in running):
        return None
    started = max((p.started_at or 0.0) for p in running)
    if started < (attempt.launched_at or attempt.created_at):
        return None   # this attempt has not started its pipelines yet
    return started


def current_attempts(conn: Connection, where=None) -> dict:
    """job id -> its current attempt (state and start: what ``stale_window_opened`` reads), of the
    jobs ``where`` (a condition on ``jobs``), in one query."""
    a = s.attempts.c
    query = select(a.job_id, a.attempt_id, a.state, a.launched_at, a.created_at).join(
        s.jobs, s.jobs.c.current_attempt == a.attempt_id)
    return {row.job_id: row for row in conn.execute(query if where is None else query.where(where))}


def checkpoint_health(job, pipelines, now: float, attempt=None) -> str | None:
    """HEALTHY, IDLE (caught up with its sources), CHECKPOINT_STALE or HUNG; None unless running.

    The leader flags staleness (``stale_since``) within one reconcile tick; a reader
    computes the same verdict from the same stored facts in between (``attempt``: the job's
    current one), pipeline by pipeline and from the same window as the leader does
    (``stale_window_opened``), on the store's clock (``now``). HUNG (no batch and no task
    progress for ``job.progress-timeout``) is the leader's flag (``hung_since``) alone.
    """
    if job.status not in (JobStatus.RUNNING, JobStatus.DOING_SAVEPOINT):
        return None
    if all_idle(pipelines):        # every running pipeline caught up
        return "IDLE"
    if job.hung_since is not None:
        return "HUNG"
    if job.stale_since is not None:
        return "CHECKPOINT_STALE"
    opened = stale_window_opened(attempt, pipelines)
    if job.stale_after_s is None or opened is None:
        return "HEALTHY"
    pending = [p for p in pipelines if p.status == PipelineStatus.RUNNING and not p.idle]
    oldest = min((max(p.last_checkpoint_at or 0.0, opened) for p in pending), default=now)
    return "CHECKPOINT_STALE" if now - oldest > job.stale_after_s else "HEALTHY"


def _checkpoint_row(c, unrestorable: str | None = None) -> dict:
    row = {"checkpointId": c.checkpoint_id, "pipelineId": c.pipeline_id, "batchId": c.batch_id,
           "kind": c.kind, "status": c.status, "time": iso(c.created_at), "durationMs": c.duration_ms,
           "rows": c.rows}
    if c.kind == "SAVEPOINT" and c.status == "COMPLETED":
        row["unrestorable"] = unrestorable     # why `resume --from` it is refused, or None
    return row


def checkpoint_summary(job, stats: dict, pipelines, now: float, attempt=None) -> dict:
    """What the API shows of a job's checkpoints (``stats``: ``checkpoint_stats``; ``now``: the store's
    time; ``attempt``: the job's current one)."""
    latest = stats["latest"]
    return {
        "lastCheckpointId": latest.checkpoint_id if latest is not None else None,
        "lastCheckpointTime": iso(latest.created_at) if latest is not None else None,
        "lastCheckpointDurationMs": latest.duration_ms if latest is not None else None,
        "lastCheckpointRows": latest.rows if latest is not None else None,
        "secondsSinceLastCheckpoint": round(now - latest.created_at, 1) if latest is not None else None,
        "completed": stats["completed"], "failed": stats["failed"], "restored": stats["restored"],
        "health": checkpoint_health(job, pipelines, now, attempt),
        "staleAfterSeconds": job.stale_after_s, "onStale": job.on_stale,
        "progressTimeoutSeconds": job.progress_timeout_s, "onHung": job.on_hung,
        "hungSince": iso(job.hung_since),
    }


def checkpoint_report(conn: Connection, job_id: str, limit: int = 100) -> dict | None:
    """Counts, the latest, per-pipeline figures and the history (newest first) of a job's checkpoints."""
    view = job_view(conn, job_id)
    if view is None:
        return None
    job, now = view.job, read_store_now(conn)
    history = conn.execute(select(s.checkpoints).where(_checkpoint_key(job))
                           .order_by(s.checkpoints.c.checkpoint_id.desc()).limit(limit)).all()
    per_pipeline = []
    for p in view.pipelines:
        latest = None if p.last_checkpoint_id is None else conn.execute(select(s.checkpoints).where(and_(
            _checkpoint_key(job), s.checkpoints.c.checkpoint_id == p.last_checkpoint_id))).first()
        per_pipeline.append({
            "pipelineId": p.pipeline_id, "status": p.status, "idle": bool(p.idle),
            "completed": p.checkpoints_completed, "failed": p.checkpoints_failed,
            "latest": _checkpoint_row(latest) if latest is not None else None,
            "secondsSinceLastCheckpoint": round(now - latest.created_at, 1) if latest is not None else None})
    summary = checkpoint_summary(job, checkpoint_stats(conn, job, view.pipelines), view.pipelines, now, view.attempt)
    return {"jobId": job_id, "jobStatus": job.status, **summary, "pipelines": per_pipeline,
            "history": [_checkpoint_row(c, _unrestorable(conn, job, c)) for c in history]}


def _unrestorable(conn, job, checkpoint) -> str | None:
    """Why a resume refuses ``--from`` this completed savepoint, or None: a listing says so rather than offer it
    (outside review of 7d56489..26756a7, F4). The history is the current incarnation's: no earlier run's."""
    if checkpoint.kind != "SAVEPOINT" or checkpoint.status != "COMPLETED":
        return None
    return savepoint_refused(conn, job, checkpoint)
