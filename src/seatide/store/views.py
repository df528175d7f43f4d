"""Read models shared by the REST API, the CLI and ``seatide run``: what a job looks like now.

Everything here is computed from the store alone, so any coordinator (leader or not)
and any client on the store answers the same.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from sqlalchemy import and_, func, select, true
from sqlalchemy.engine import Connection

from seatide.secrets import mask_config_text, mask_message, secret_values
from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.jobs import job_view, load_job
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, JobStatus, PipelineStatus

# A node whose heartbeat is older than this is shown as silent (the default worker heartbeat timeout).
NODE_SILENT_AFTER_S = 10.0


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _checkpoint_key(job):
    return and_(s.checkpoints.c.job_id == job.job_id, s.checkpoints.c.incarnation == job.incarnation)


def checkpoint_stats(conn: Connection, job) -> dict:
    return checkpoint_stats_of(conn, [job])[(job.job_id, job.incarnation)]


def checkpoint_stats_of(conn: Connection, jobs: list, where=None) -> dict[tuple[str, int], dict]:
    """``checkpoint_stats`` of many jobs' current incarnations in three queries, whatever their
    number (the running-jobs list must not read per job): the pipelines' totals
    (``checkpoints_completed``...: store/schema.py), each job's newest checkpoint by its primary
    key, and the job's savepoints (a partial index of a handful of rows). Nothing counts
    checkpoint rows or walks a job's checkpoints.

    where: the condition on ``jobs`` that selected them, when there is one: each query joins
    the jobs by it rather than bind a thousand ids (rendering and parsing those lists cost
    more than reading the rows)."""
    if not jobs:
        return {}
    c, p, j = s.checkpoints, s.pipelines, s.jobs
    wanted = {(job.job_id, job.incarnation) for job in jobs}
    if where is None:
        where = j.c.job_id.in_(sorted({job.job_id for job in jobs}))
    totals = select(p.c.job_id, p.c.incarnation, func.sum(p.c.restores).label("restored"),
                    func.sum(p.c.checkpoints_completed).label("completed"),
                    func.sum(p.c.checkpoints_failed).label("failed"),
                    func.max(p.c.last_checkpoint_id).label("latest_id")) \
        .join(j, s.of_current_incarnation(p)).where(where) \
        .group_by(p.c.job_id, p.c.incarnation)
    found = {(r.job_id, r.incarnation): r for r in conn.execute(totals).all()}
    newest = totals.subquery()
    latest = {(r.job_id, r.incarnation): r for r in conn.execute(select(c).join(newest, and_(
        c.c.job_id == newest.c.job_id, c.c.incarnation == newest.c.incarnation,
        c.c.checkpoint_id == newest.c.latest_id))).all()}
    savepoints: dict[tuple[str, int], list] = {}
    for r in conn.execute(select(c).join(j, s.of_current_incarnation(c)).where(
            where, c.c.kind == "SAVEPOINT", c.c.status == "COMPLETED")).all():
        savepoints.setdefault((r.job_id, r.incarnation), []).append(r)
    stats = {}
    for key in wanted:
        row, saved = found.get(key), savepoints.get(key, [])
        newest_of = [r for r in (latest.get(key), *saved) if r is not None]
        stats[key] = {"completed": int(row.completed or 0 if row else 0) + len(saved),
                      "failed": int(row.failed or 0) if row else 0,
                      "restored": int(row.restored or 0) if row else 0,
                      "latest": max(newest_of, key=lambda r: r.checkpoint_id, default=None)}
    return stats



def checkpoint_health(job, pipelines, latest, now: float) -> str | None:
    """HEALTHY, IDLE (caught up with its sources), CHECKPOINT_STALE or HUNG; None unless running.

    The leader flags staleness (``stale_since``) within one reconcile tick; a reader
    computes the same verdict from the same stored facts in between. HUNG (no batch and no
    task progress for ``job.progress-timeout``) is the leader's flag (``hung_since``) alone.
    """
    if job.status not in (JobStatus.RUNNING, JobStatus.DOING_SAVEPOINT):
        return None
    running = [p for p in pipelines if p.status == PipelineStatus.RUNNING]
    if running and all(p.idle for p in running):
        return "IDLE"
    if job.hung_since is not None:
        return "HUNG"
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


def checkpoint_summary(conn: Connection, job, pipelines, now: float, stats: dict | None = None) -> dict:
    """What the API shows of a job's checkpoints; ``stats`` when already read (``checkpoint_stats_of``)."""
    stats = checkpoint_stats(conn, job) if stats is None else stats
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
        "progressTimeoutSeconds": job.progress_timeout_s, "onHung": job.on_hung,
        "hungSince": iso(job.hung_since),
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
        latest = None if p.last_checkpoint_id is None else conn.execute(select(s.checkpoints).where(and_(
            _checkpoint_key(job), s.checkpoints.c.checkpoint_id == p.last_checkpoint_id))).first()
        per_pipeline.append({
            "pipelineId": p.pipeline_id, "status": p.status, "idle": bool(p.idle),
            "completed": p.checkpoints_completed, "failed": p.checkpoints_failed,
            "latest": _checkpoint_row(latest) if latest is not None else None,
            "secondsSinceLastCheckpoint": round(now - latest.created_at, 1) if latest is not None else None})
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
            "progressTime": iso(attempt.progress_at), "tasksCompleted": attempt.tasks_done,
            "error": masked(attempt.error)},
        "attempts": [{**_attempt_row(a), "error": masked(a.error)} for a in job_attempts(conn, job)],
        "metrics": {
            "SourceReceivedCount": sum(p.rows_read for p in view.pipelines),
            "SinkWriteCount": sum(p.rows_written for p in view.pipelines),
        },
        **progress(job, sum(p.rows_read for p in view.pipelines), sum(p.rows_written for p in view.pipelines), now),
        "checkpoint": checkpoint_summary(conn, job, view.pipelines, now),
        "config": mask_config_text(job.config, variables),
    }


def progress(job, rows_read: int, rows_written: int, now: float) -> dict:
    """Rows in and out, how long the job has run, and its rate: rows written per second since submission."""
    duration = max(0.0, (job.finished_at or now) - job.created_at)
    return {"rowsRead": rows_read, "rowsWritten": rows_written, "durationSeconds": round(duration, 1),
            "rowsPerSecond": round(rows_written / duration, 1) if duration > 0 else None}


def job_attempts(conn: Connection, job) -> list:
    """The attempts of the job's current incarnation, oldest first."""
    return conn.execute(select(s.attempts).where(and_(
        s.attempts.c.job_id == job.job_id, s.attempts.c.incarnation == job.incarnation))
        .order_by(s.attempts.c.attempt_id)).all()


def _attempt_row(a) -> dict:
    return {"attemptId": a.attempt_id, "number": a.number, "worker": a.worker_id, "state": a.state,
            "pid": a.pid, "createTime": iso(a.created_at), "launchTime": iso(a.launched_at),
            "heartbeatTime": iso(a.heartbeat_at), "endTime": iso(a.ended_at), "exitCode": a.exit_code,
            "error": a.error}


def log_attempt(conn: Connection, job_id: str, attempt_id: int | None = None):
    """The attempt whose driver log to show: the one asked for (if it is this job's), else the
    job's current attempt, else its newest. None when there is none."""
    query = select(s.attempts).where(s.attempts.c.job_id == job_id)
    if attempt_id is not None:
        return conn.execute(query.where(s.attempts.c.attempt_id == attempt_id)).first()
    job = load_job(conn, job_id)
    if job is not None and job.current_attempt is not None:
        current = conn.execute(query.where(s.attempts.c.attempt_id == job.current_attempt)).first()
        if current is not None:
            return current
    return conn.execute(query.order_by(s.attempts.c.attempt_id.desc()).limit(1)).first()


def job_events(conn: Connection, job_id: str, after: int = 0, limit: int = 100) -> list[dict] | None:
    """A job's event log (every incarnation), oldest first, from the event after ``after``.

    None when neither the job nor any event of it exists. Events outlive the job's other
    rows (history expiry keeps them as the audit trail), so a forgotten job still has them.
    """
    job = load_job(conn, job_id)
    rows = conn.execute(select(s.events).where(and_(s.events.c.job_id == job_id, s.events.c.seq > after))
                        .order_by(s.events.c.seq).limit(limit)).all()
    if not rows and job is None and conn.execute(
            select(s.events.c.seq).where(s.events.c.job_id == job_id).limit(1)).first() is None:
        return None
    # Masked by whoever wrote them; masked again here for events written before that.
    secrets = secret_values(job.config, json.loads(job.variables or "{}")) if job is not None else frozenset()
    return [{"seq": e.seq, "time": iso(e.at), "at": e.at, "kind": e.kind, "incarnation": e.incarnation,
             "epoch": e.epoch, "actor": e.actor, "detail": _detail(mask_message(e.detail, secrets))} for e in rows]


def _detail(text: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text     # written by hand or by an older version: shown as it is


# What a list row reads of a job: everything but its config text, variables and outline.
LIST_JOB_COLUMNS = [c for c in s.jobs.c if c.name not in ("config", "variables", "outline")]


def job_rows(conn: Connection, statuses: set[str] | None = None, exclude: set[str] | None = None) -> list[dict]:
    """Jobs by status, oldest first; running ones with their checkpoint summary. A fixed
    number of queries however many jobs are listed (never one per job), each naming the
    jobs by the same condition (never by a list of their ids)."""
    j = s.jobs.c
    where = true()
    if statuses is not None:
        where = and_(where, j.status.in_(sorted(statuses)))
    if exclude is not None:
        where = and_(where, j.status.notin_(sorted(exclude)))
    jobs = conn.execute(select(*LIST_JOB_COLUMNS).where(where).order_by(j.created_at)).all()
    if not jobs:
        return []
    totals = row_totals(conn, where)
    live = [job for job in jobs if job.status not in JOB_TERMINAL]
    pipelines: dict[tuple[str, int], list] = {}
    stats: dict[tuple[str, int], dict] = {}
    if live:
        live_where = and_(where, j.status.notin_(sorted(JOB_TERMINAL)))
        for p in conn.execute(select(s.pipelines).join(s.jobs, j.job_id == s.pipelines.c.job_id).where(live_where)
                              .order_by(s.pipelines.c.pipeline_id)).all():
            pipelines.setdefault((p.job_id, p.incarnation), []).append(p)
        stats = checkpoint_stats_of(conn, live, live_where)
    now = time.time()
    rows = []
    for job in jobs:
        key = (job.job_id, job.incarnation)
        row = {"jobId": job.job_id, "jobName": job.name, "jobStatus": job.status,
               "createTime": iso(job.created_at), "finishedTime": iso(job.finished_at), "errorMsg": job.error_msg,
               **progress(job, *totals.get(key, (0, 0)), now)}
        if job.status not in JOB_TERMINAL:
            row["checkpoint"] = checkpoint_summary(conn, job, pipelines.get(key, []), now, stats[key])
        rows.append(row)
    return rows


def row_totals(conn: Connection, where) -> dict[tuple[str, int], tuple[int, int]]:
    """(job id, incarnation) -> rows read and written over its pipelines, of the jobs ``where``
    selects, in one query."""
    p = s.pipelines.c
    query = select(p.job_id, p.incarnation, func.sum(p.rows_read), func.sum(p.rows_written)).join(
        s.jobs, s.jobs.c.job_id == p.job_id).where(where).group_by(p.job_id, p.incarnation)
    return {(job_id, inc): (int(read or 0), int(written or 0))
            for job_id, inc, read, written in conn.execute(query).all()}


def overview(conn: Connection) -> dict:
    lease = conn.execute(select(s.leader_lease).where(s.leader_lease.c.id == 1)).first()
    now = read_store_now(conn)     # the lease and heartbeats are stamped by the store's clock
    counts = dict(conn.execute(select(s.jobs.c.status, func.count()).group_by(s.jobs.c.status)).all())
    nodes = conn.execute(select(s.nodes).where(s.nodes.c.stopped.is_(False))).all()
    alive = [n for n in nodes if now - n.heartbeat_at < NODE_SILENT_AFTER_S]
    leader = _leader(lease, now)
    return {
        "leader": None if leader is None else {k: leader[k] for k in ("nodeId", "url", "epoch")},
        "jobs": {"total": sum(counts.values()), **{k.lower(): v for k, v in counts.items()},
                 "running": sum(v for k, v in counts.items() if k not in JOB_TERMINAL)},
        "workers": [{"nodeId": n.node_id, "host": n.host, "slots": n.slots} for n in alive if n.role == "worker"],
        "coordinators": [{"nodeId": n.node_id, "url": n.url} for n in alive if n.role == "coordinator"],
    }


def _leader(lease, now: float) -> dict | None:
    """The lease holder while its lease runs; None between leaders."""
    if lease is None or lease.node_id is None or lease.expires_at < now:
        return None
    return {"nodeId": lease.node_id, "url": lease.url, "epoch": lease.epoch,
            "since": iso(lease.acquired_at), "leaseExpiresInSeconds": round(lease.expires_at - now, 1)}


def nodes_report(conn: Connection) -> dict:
    """Every registered coordinator and worker with its heartbeat, the leader and its epoch.

    A node is ALIVE while it heartbeats, SILENT once its heartbeat is older than
    ``NODE_SILENT_AFTER_S`` (paused, partitioned or killed), STOPPED after a clean shutdown.
    """
    now = read_store_now(conn)     # the lease and heartbeats are stamped by the store's clock
    lease = conn.execute(select(s.leader_lease).where(s.leader_lease.c.id == 1)).first()
    leader = _leader(lease, now)
    a = s.attempts.c
    load = dict(conn.execute(select(a.worker_id, func.count()).where(and_(
        a.ended_at.is_(None), a.state.in_(ATTEMPT_LIVE))).group_by(a.worker_id)).all())
    report: dict = {"leader": leader, "epoch": lease.epoch if lease is not None else 0,
                    "coordinators": [], "workers": []}
    for n in conn.execute(select(s.nodes).order_by(s.nodes.c.node_id)):
        silent_for = now - n.heartbeat_at
        state = "STOPPED" if n.stopped else "SILENT" if silent_for >= NODE_SILENT_AFTER_S else "ALIVE"
        node = {"nodeId": n.node_id, "host": n.host, "pid": n.pid, "url": n.url, "state": state,
                "startTime": iso(n.started_at), "heartbeatTime": iso(n.heartbeat_at),
                "secondsSinceHeartbeat": round(silent_for, 1)}
        if n.role == "worker":
            report["workers"].append({**node, "slots": n.slots, "runningAttempts": load.get(n.node_id, 0)})
        else:
            report["coordinators"].append({**node, "leader": leader is not None and leader["nodeId"] == n.node_id})
    return report
