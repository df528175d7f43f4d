"""A driver that finds its pipeline's directory without a checkpoint asks the store first.

A fresh directory (the pipeline's first start, or a fresh start's move) begins a new lineage. But the
same incarnation's next attempt (a retry) finds such a directory too when it was lost or put back
from a backup after the sinks had decided a batch that no checkpoint row records yet: no resume
checked it, and the new lineage would write that batch to the sinks again
(``store/decided_batches.py``). The attempt fails instead, as nothing but the operator can fix it.
"""

from __future__ import annotations

from sqlalchemy import select

from seatide.plugin.base import PermanentError
from seatide.store import schema as s
from seatide.store.decided_batches import lost_lineage, newest_decided
from seatide.store.restore import run_first_incarnation


def refuse_lost_lineage(reporter, pipeline_id: int, directory: str) -> None:
    """Raise ``PermanentError`` when the pipeline's sinks decided a batch that ``directory``,
    which holds no SeaTide checkpoint, cannot replay (``reporter``: the attempt's)."""
    def newest(conn) -> int | None:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == reporter.job_id)).first()
        return newest_decided(conn, job, pipeline_id, directory, run_first_incarnation(conn, job))

    lost = lost_lineage(directory, reporter.read(newest))
    if lost is not None:
        raise PermanentError(f"pipeline {pipeline_id}: {lost}; or start it over explicitly once the job has "
                             f"failed: seatide resume {reporter.job_id} --fallback fresh")
