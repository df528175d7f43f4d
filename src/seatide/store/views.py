"""Read models shared by the REST API, the CLI and ``seatide run``: what a job looks like now.

Everything here is computed from the store alone, so any coordinator (leader or not)
and any client on the store answers the same.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from seatide.secrets import mask_config_text, mask_message, secret_values
from seatide.store import schema as s
from seatide.store.jobs import job_view
from seatide.store.states import JOB_TERMINAL


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _checkpoint_key(job):
    return and_(s.checkpoints.c.job_id == job.job_id, s.checkpoints.c.incarnation == job.incarnation)


def checkpoint_stats(conn: Connection, job) -> dict:
    key = _checkpoint_key(job)
    counts = dict(conn.execute(select(s.checkpoints.c.status, func.count()).where(key)
                               .group_by(s.checkpoints.c.status)).all())
    restored = conn.execute(select(func.sum(s.pipelines.c.restores)).where(and_(
        s.pipelines.c.job_id == job.job_id, s.pipelines.c.incarnation == job.incarnation))).scalar()
    latest = conn.execute(select(s.checkpoints).where(and_(key, s.checkpoints.c.status == "COMPLETED"))
                          .order_by(s.checkpoints.c.checkpoint_id.desc()).limit(1)).first()
    return {"completed": counts.get("COMPLETED", 0), "failed": counts.get("FAILED", 0),
            "restored": restored or 0, "latest": latest}


def checkpoint_health(job, pipelines, latest, now: float) -> str | None:
    """HEALTHY, IDLE (caught up with its sources) or CHECKPOINT_STALE; None unless running.

    The leader flags staleness (``stale_since``) within one reconcile tick; a reader
    computes the same verdict from the same stored facts in between.
    """
    if job.status not in ("RUNNING", "DOING_SAVEPOINT"):
        return None
    running = [p for p in pipelines if p.status == "RUNNING"]
    if running and all(p.idle for p in running):
        return "IDLE"
    if job.stale_since is not None:
        return "CHECKPOINT_STALE"
    if job.stale_after_s is None:
        return "HEALTHY"
    since = latest.created_at if latest is not None else job.updated_at
    return "CHECKPOINT_STALE" if now - since > job.stale_after_s else "HEALTHY"


def _checkpoint_row(c) -> dict:
    return {"checkpointId": c.checkpoint_id, "pipelineId": c.pipeline_id, "batchId": c.batch_id,
            "kind": c.kind, "status": c.status, "time": iso(c.created_at), "durationMs": c.duration_ms,
            "rows": c.rows}


def checkpoint_summary(conn: Connection, job, pipelines, now: float) -> dict:
    stats = checkpoint_stats(conn, job)
    latest = stats["latest"]
    return {
        "lastCheckpointId": latest.checkpoint_id if latest is not None else None,
        "lastCheckpointTime": iso(latest.created_at) if latest is not None else None,
        "lastCheckpointDurationMs": latest.duration_ms if latest is not None else None,
        "lastCheckpointRows": latest.rows if latest is not None else None,
        "secondsSinceLastCheckpoint": round(now - latest.created_at, 1) if latest is not None else None,
        "completed": stats["completed"], "failed": stats["failed"], "restored": stats["restored"],
        "health": checkpoint_health(job, pipelines, latest, now),
        "staleAfterSeconds": job.stale_after_s, "onStale": job.on_stale,
    }


def checkpoint_report(conn: Connection, job_id: str, limit: int = 100) -> dict | None:
    """Counts, the latest, per-pipeline figures and the history (newest first) of a job's checkpoints."""
    view = job_view(conn, job_id)
    if view is None:
        return None
    job, now = view.job, time.time()
    history = conn.execute(select(s.checkpoints).where(_checkpoint_key(job))
                           .order_by(s.checkpoints.c.checkpoint_id.desc()).limit(limit)).all()
    per_pipeline = []
    for p in view.pipelines:
        rows = conn.execute(select(s.checkpoints).where(and_(_checkpoint_key(job),
                            s.checkpoints.c.pipeline_id == p.pipeline_id, s.checkpoints.c.status == "COMPLETED"))
                            .order_by(s.checkpoints.c.checkpoint_id.desc()).limit(1)).first()
        counts = dict(conn.execute(select(s.checkpoints.c.status, func.count()).where(and_(
            _checkpoint_key(job), s.checkpoints.c.pipeline_id == p.pipeline_id)).group_by(s.checkpoints.c.status)).all())
        per_pipeline.append({
            "pipelineId": p.pipeline_id, "status": p.status, "idle": bool(p.idle),
            "completed": counts.get("COMPLETED", 0), "failed": counts.get("FAILED", 0),
            "latest": _checkpoint_row(rows) if rows is not None else None,
            "secondsSinceLastCheckpoint": round(now - rows.created_at, 1) if rows is not None else None})
    summary = checkpoint_summary(conn, job, view.pipelines, now)
    return {"jobId": job_id, "jobStatus": job.status, **summary, "pipelines": per_pipeline,
            "history": [_checkpoint_row(c) for c in history]}


def job_info(conn: Connection, job_id: str) -> dict | None:
    view = job_view(conn, job_id)
    if view is None:
        return None
    job, attempt, now = view.job, view.attempt, time.time()
    variables = json.loads(job.variables or "{}")
    secrets = secret_values(job.config, variables)

    def masked(message: str | None) -> str | None:
        # Stored masked by whoever wrote it; masked again here for rows written before that.
        return mask_message(message, secrets)

    return {
        "jobId": job.job_id,
        "jobName": job.name,
        "jobStatus": job.status,
        "jobMode": job.mode,
        "incarnation": job.incarnation,
        "desiredState": job.desired,
        "createTime": iso(job.created_at),
        "finishedTime": iso(job.finished_at),
        "errorMsg": masked(job.error_msg),
        "retriesUsed": job.retries_used,
        "restoredFrom": job.restored_from,
        "pipelines": [{
            "pipelineId": p.pipeline_id, "status": p.status, "rowsRead": p.rows_read,
            "rowsWritten": p.rows_written, "lastBatchId": p.last_batch_id, "idle": bool(p.idle),
            "error": masked(p.error)} for p in view.pipelines],
        "currentAttempt": None if attempt is None else {
            "attemptId": attempt.attempt_id, "number": attempt.number, "worker": attempt.worker_id,
            "state": attempt.state, "pid": attempt.pid, "heartbeatTime": iso(attempt.heartbeat_at),
            "error": masked(attempt.error)},
        "metrics": {
            "SourceReceivedCount": sum(p.rows_read for p in view.pipelines),
            "SinkWriteCount": sum(p.rows_written for p in view.pipelines),
        },
        "checkpoint": checkpoint_summary(conn, job, view.pipelines, now),
        "config": mask_config_text(job.config, variables),
    }


def job_rows(conn: Connection, statuses: set[str] | None = None, exclude: set[str] | None = None) -> list[dict]:
    query = select(s.jobs).order_by(s.jobs.c.created_at)
    rows = []
    for job in conn.execute(query):
        if statuses is not None and job.status not in statuses:
            continue
        if exclude is not None and job.status in exclude:
            continue
        row = {"jobId": job.job_id, "jobName": job.name, "jobStatus": job.status,
               "createTime": iso(job.created_at), "finishedTime": iso(job.finished_at), "errorMsg": job.error_msg}
        if job.status not in JOB_TERMINAL:
            pipes = job_view(conn, job.job_id).pipelines
            row["checkpoint"] = checkpoint_summary(conn, job, pipes, time.time())
        rows.append(row)
    return rows


def overview(conn: Connection) -> dict:
    lease = conn.execute(select(s.leader_lease).where(s.leader_lease.c.id == 1)).first()
    now = time.time()
    counts = dict(conn.execute(select(s.jobs.c.status, func.count()).group_by(s.jobs.c.status)).all())
    nodes = conn.execute(select(s.nodes).where(s.nodes.c.stopped.is_(False))).all()
    alive = [n for n in nodes if now - n.heartbeat_at < 10]
    return {
        "leader": None if lease is None or lease.node_id is None or lease.expires_at < now else {
            "nodeId": lease.node_id, "url": lease.url, "epoch": lease.epoch},
        "jobs": {"total": sum(counts.values()), **{k.lower(): v for k, v in counts.items()},
                 "running": sum(v for k, v in counts.items() if k not in JOB_TERMINAL)},
        "workers": [{"nodeId": n.node_id, "host": n.host, "slots": n.slots} for n in alive if n.role == "worker"],
        "coordinators": [{"nodeId": n.node_id, "url": n.url} for n in alive if n.role == "coordinator"],
    }
