"""Read models shared by the REST API, the CLI and ``seatide run``: what a job looks like now.

Everything here is computed from the store alone, so any coordinator (leader or not)
and any client on the store answers the same.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.jobs import job_view
from seatide.store.states import JOB_TERMINAL


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def checkpoint_stats(conn: Connection, job) -> dict:
    key = and_(s.checkpoints.c.job_id == job.job_id, s.checkpoints.c.incarnation == job.incarnation)
    completed = conn.execute(select(func.count()).where(and_(key, s.checkpoints.c.status == "COMPLETED"))).scalar()
    failed = conn.execute(select(func.count()).where(and_(key, s.checkpoints.c.status == "FAILED"))).scalar()
    latest = conn.execute(select(s.checkpoints).where(and_(key, s.checkpoints.c.status == "COMPLETED"))
                          .order_by(s.checkpoints.c.checkpoint_id.desc()).limit(1)).first()
    return {"completed": completed or 0, "failed": failed or 0, "latest": latest}


def checkpoint_health(job, pipelines, latest, stale_after_s: float | None, now: float) -> str | None:
    """HEALTHY, IDLE (caught up with its sources) or CHECKPOINT_STALE; None when not running."""
    if job.status in JOB_TERMINAL or job.status not in ("RUNNING", "DOING_SAVEPOINT"):
        return None
    running = [p for p in pipelines if p.status == "RUNNING"]
    if running and all(p.idle for p in running):
        return "IDLE"
    if stale_after_s is None:
        return "HEALTHY"
    since = now - (latest.created_at if latest is not None else job.updated_at)
    return "CHECKPOINT_STALE" if since > stale_after_s else "HEALTHY"


def job_info(conn: Connection, job_id: str, stale_after_s: float | None = None) -> dict | None:
    view = job_view(conn, job_id)
    if view is None:
        return None
    job, attempt, now = view.job, view.attempt, time.time()
    stats = checkpoint_stats(conn, job)
    latest = stats["latest"]
    return {
        "jobId": job.job_id,
        "jobName": job.name,
        "jobStatus": job.status,
        "jobMode": job.mode,
        "incarnation": job.incarnation,
        "desiredState": job.desired,
        "createTime": iso(job.created_at),
        "finishedTime": iso(job.finished_at),
        "errorMsg": job.error_msg,
        "retriesUsed": job.retries_used,
        "restoredFrom": job.restored_from,
        "pipelines": [{
            "pipelineId": p.pipeline_id, "status": p.status, "rowsRead": p.rows_read,
            "rowsWritten": p.rows_written, "lastBatchId": p.last_batch_id, "idle": bool(p.idle),
            "error": p.error} for p in view.pipelines],
        "currentAttempt": None if attempt is None else {
            "attemptId": attempt.attempt_id, "number": attempt.number, "worker": attempt.worker_id,
            "state": attempt.state, "pid": attempt.pid, "heartbeatTime": iso(attempt.heartbeat_at),
            "error": attempt.error},
        "metrics": {
            "SourceReceivedCount": sum(p.rows_read for p in view.pipelines),
            "SinkWriteCount": sum(p.rows_written for p in view.pipelines),
        },
        "checkpoint": {
            "lastCheckpointId": latest.checkpoint_id if latest is not None else None,
            "lastCheckpointTime": iso(latest.created_at) if latest is not None else None,
            "secondsSinceLastCheckpoint": round(now - latest.created_at, 1) if latest is not None else None,
            "completed": stats["completed"],
            "failed": stats["failed"],
            "health": checkpoint_health(job, view.pipelines, latest, stale_after_s, now),
        },
    }


def job_rows(conn: Connection, statuses: set[str] | None = None, exclude: set[str] | None = None) -> list[dict]:
    query = select(s.jobs).order_by(s.jobs.c.created_at)
    rows = []
    for job in conn.execute(query):
        if statuses is not None and job.status not in statuses:
            continue
        if exclude is not None and job.status in exclude:
            continue
        rows.append({"jobId": job.job_id, "jobName": job.name, "jobStatus": job.status,
                     "createTime": iso(job.created_at), "finishedTime": iso(job.finished_at),
                     "errorMsg": job.error_msg})
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
