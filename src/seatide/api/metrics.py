"""Prometheus metrics, computed from the store (so every coordinator reports the same)."""

from __future__ import annotations

import time

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.states import JOB_TERMINAL
from seatide.store.views import checkpoint_summary
from seatide.store.jobs import job_view

HEALTH = ("HEALTHY", "IDLE", "CHECKPOINT_STALE")


def _labels(**labels) -> str:
    return "{" + ",".join(f'{k}="{str(v).replace(chr(34), "")}"' for k, v in labels.items()) + "}"


def render(conn: Connection) -> str:
    lines = [
        "# HELP seatide_jobs Jobs by status.", "# TYPE seatide_jobs gauge",
    ]
    for status, count in conn.execute(select(s.jobs.c.status, func.count()).group_by(s.jobs.c.status)):
        lines.append(f"seatide_jobs{_labels(status=status)} {count}")
    lease = conn.execute(select(s.leader_lease).where(s.leader_lease.c.id == 1)).first()
    lines += ["# HELP seatide_leader_epoch The current leader epoch.", "# TYPE seatide_leader_epoch gauge",
              f"seatide_leader_epoch {lease.epoch if lease else 0}"]
    families = {
        "seatide_job_rows_read_total": ("counter", "Rows read by the job's sources."),
        "seatide_job_rows_written_total": ("counter", "Rows written by the job's sinks."),
        "seatide_job_checkpoints_completed_total": ("counter", "Completed checkpoints."),
        "seatide_job_checkpoints_failed_total": ("counter", "Checkpoints that failed or timed out."),
        "seatide_job_last_checkpoint_age_seconds": ("gauge", "Seconds since the last completed checkpoint."),
        "seatide_job_checkpoint_health": ("gauge", "1 for the job's current checkpoint health."),
    }
    samples: dict[str, list[str]] = {name: [] for name in families}
    now = time.time()
    for job in conn.execute(select(s.jobs)):
        if job.status in JOB_TERMINAL:
            continue
        view = job_view(conn, job.job_id)
        summary = checkpoint_summary(conn, job, view.pipelines, now)
        labels = _labels(job_id=job.job_id, job_name=job.name)
        samples["seatide_job_rows_read_total"].append(f"{labels} {sum(p.rows_read for p in view.pipelines)}")
        samples["seatide_job_rows_written_total"].append(f"{labels} {sum(p.rows_written for p in view.pipelines)}")
        samples["seatide_job_checkpoints_completed_total"].append(f"{labels} {summary['completed']}")
        samples["seatide_job_checkpoints_failed_total"].append(f"{labels} {summary['failed']}")
        if summary["secondsSinceLastCheckpoint"] is not None:
            samples["seatide_job_last_checkpoint_age_seconds"].append(f"{labels} {summary['secondsSinceLastCheckpoint']}")
        for health in HEALTH:
            value = 1 if summary["health"] == health else 0
            samples["seatide_job_checkpoint_health"].append(
                f"{_labels(job_id=job.job_id, job_name=job.name, health=health)} {value}")
    for name, (kind, help_text) in families.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{sample}" for sample in samples[name]]
    return "\n".join(lines) + "\n"
