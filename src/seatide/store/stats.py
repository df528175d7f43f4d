"""Store-wide figures for metrics: every job's current incarnation, read in a fixed number of queries.

A scrape must cost the store the same whether it holds one job or a thousand, so each
figure is one grouped query over all jobs (joined to each job's current incarnation),
never a query per job. Everything comes from the store, so any coordinator reads the
same figures, and a failover loses none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.checkpoint_views import Checkpoint, current_attempts, pipeline_checkpoint


@dataclass
class PipelineStats:
    row: Any                                  # the pipelines row of the job's current incarnation

    @property
    def latest(self) -> Checkpoint | None:
        """The newest COMPLETED checkpoint, as the row keeps it (no checkpoint row is read)."""
        return pipeline_checkpoint(self.row)

    @property
    def completed(self) -> int:
        """Checkpoints recorded COMPLETED, rows retention pruned included (the row's total)."""
        return self.row.checkpoints_completed

    @property
    def failed(self) -> int:
        return self.row.checkpoints_failed


@dataclass
class JobStats:
    job: Any                                  # the jobs row (without its config text)
    attempts: int = 0                         # of the current incarnation
    attempt: Any | None = None                # the current one (its state and start: the health's window)
    pipelines: list[PipelineStats] = field(default_factory=list)

    @property
    def latest(self) -> Any | None:
        """The job's newest completed checkpoint, whichever pipeline made it."""
        done = [p.latest for p in self.pipelines if p.latest is not None]
        return max(done, key=lambda c: c.created_at) if done else None


@dataclass
class StoreStats:
    jobs: list[JobStats]
    lease: Any | None
    leader_changes: int
    holds: list = field(default_factory=list)    # source_holds rows with their job's name


JOB_COLUMNS = (s.jobs.c.job_id, s.jobs.c.incarnation, s.jobs.c.name, s.jobs.c.status, s.jobs.c.retries_used,
               s.jobs.c.stale_since, s.jobs.c.stale_after_s, s.jobs.c.hung_since, s.jobs.c.updated_at)


def store_stats(conn: Connection) -> StoreStats:
    """Seven queries, whatever the number of jobs."""
    jobs = {row.job_id: JobStats(row) for row in conn.execute(select(*JOB_COLUMNS).order_by(s.jobs.c.created_at))}
    for row in conn.execute(select(s.pipelines).join(s.jobs, s.of_current_incarnation(s.pipelines))
                            .order_by(s.pipelines.c.job_id, s.pipelines.c.pipeline_id)):
        if row.job_id in jobs:        # a job submitted between the two reads shows up next scrape
            jobs[row.job_id].pipelines.append(PipelineStats(row))

    a = s.attempts
    for job_id, count in conn.execute(select(a.c.job_id, func.count()).join(s.jobs, s.of_current_incarnation(a))
                                      .group_by(a.c.job_id)):
        if job_id in jobs:
            jobs[job_id].attempts = count

    for job_id, attempt in current_attempts(conn).items():
        if job_id in jobs:
            jobs[job_id].attempt = attempt

    lease = conn.execute(select(s.leadership).where(s.leadership.c.id == 1)).first()
    # Leader events carry no job id: the (job_id, seq) index finds them without a scan of the log.
    changes = conn.execute(select(func.count()).select_from(s.events).where(and_(
        s.events.c.job_id.is_(None), s.events.c.kind == "LEADER_ELECTED"))).scalar()
    h = s.source_holds
    holds = conn.execute(select(h, s.jobs.c.name.label("job_name")).join(s.jobs, s.jobs.c.job_id == h.c.job_id)
                         .order_by(h.c.job_id, h.c.pipeline_id, h.c.plugin_id)).all()
    return StoreStats(list(jobs.values()), lease, changes or 0, holds)
