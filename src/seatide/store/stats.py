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


@dataclass
class PipelineStats:
    row: Any                                  # the pipelines row of the job's current incarnation
    completed: int = 0                        # checkpoints by status (rows, plus those retention pruned)
    failed: int = 0
    latest: Any | None = None                 # the newest COMPLETED checkpoint (created_at, duration_ms)

    def __post_init__(self):
        self.completed, self.failed = self.row.pruned_completed, self.row.pruned_failed


@dataclass
class JobStats:
    job: Any                                  # the jobs row (without its config text)
    attempts: int = 0                         # of the current incarnation
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


def _current(table):
    """Join condition: rows of a job's current incarnation only."""
    return and_(table.c.job_id == s.jobs.c.job_id, table.c.incarnation == s.jobs.c.incarnation)


JOB_COLUMNS = (s.jobs.c.job_id, s.jobs.c.incarnation, s.jobs.c.name, s.jobs.c.status, s.jobs.c.retries_used,
               s.jobs.c.stale_since, s.jobs.c.stale_after_s, s.jobs.c.hung_since, s.jobs.c.updated_at)


def store_stats(conn: Connection) -> StoreStats:
    """Seven queries, whatever the number of jobs."""
    jobs = {row.job_id: JobStats(row) for row in conn.execute(select(*JOB_COLUMNS).order_by(s.jobs.c.created_at))}
    pipelines: dict[tuple[str, int], PipelineStats] = {}
    for row in conn.execute(select(s.pipelines).join(s.jobs, _current(s.pipelines))
                            .order_by(s.pipelines.c.job_id, s.pipelines.c.pipeline_id)):
        if row.job_id in jobs:        # a job submitted between the two reads shows up next scrape
            pipelines[(row.job_id, row.pipeline_id)] = stats = PipelineStats(row)
            jobs[row.job_id].pipelines.append(stats)

    c = s.checkpoints
    for job_id, pipeline_id, status, count in conn.execute(
            select(c.c.job_id, c.c.pipeline_id, c.c.status, func.count()).join(s.jobs, _current(c))
            .group_by(c.c.job_id, c.c.pipeline_id, c.c.status)):
        stats = pipelines.get((job_id, pipeline_id))
        if stats is not None and status in ("COMPLETED", "FAILED"):
            setattr(stats, status.lower(), getattr(stats, status.lower()) + count)

    newest = (select(c.c.job_id, c.c.incarnation, func.max(c.c.checkpoint_id).label("checkpoint_id"))
              .join(s.jobs, _current(c)).where(c.c.status == "COMPLETED")
              .group_by(c.c.job_id, c.c.incarnation, c.c.pipeline_id).subquery())
    for row in conn.execute(select(c.c.job_id, c.c.pipeline_id, c.c.created_at, c.c.duration_ms).join(
            newest, and_(c.c.job_id == newest.c.job_id, c.c.incarnation == newest.c.incarnation,
                         c.c.checkpoint_id == newest.c.checkpoint_id))):
        stats = pipelines.get((row.job_id, row.pipeline_id))
        if stats is not None:
            stats.latest = row

    a = s.attempts
    for job_id, count in conn.execute(select(a.c.job_id, func.count()).join(s.jobs, _current(a))
                                      .group_by(a.c.job_id)):
        if job_id in jobs:
            jobs[job_id].attempts = count

    lease = conn.execute(select(s.leader_lease).where(s.leader_lease.c.id == 1)).first()
    # Leader events carry no job id: the (job_id, seq) index finds them without a scan of the log.
    changes = conn.execute(select(func.count()).select_from(s.events).where(and_(
        s.events.c.job_id.is_(None), s.events.c.kind == "LEADER_ELECTED"))).scalar()
    return StoreStats(list(jobs.values()), lease, changes or 0)
