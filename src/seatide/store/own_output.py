"""Whether a pipeline started over had written anything before the fresh start that began it.

A fresh start makes its pipelines' save modes anew (``runtime/sink_runs.py``: ``P_<run>~<began>``)
so that what their old lineages committed is emptied before they write it again. A pipeline whose
old lineages never began a batch in the run (it never reached its sinks' door: its driver died
before its first batch, the job stopped first) has nothing of its own in any target: where its
decision would be refused over rows other pipelines keep, it follows the run's standing decision of
the target instead, as it would have had it not been started over (outside review 8, F: refused,
as before the fresh start's own scope it was not). Any sign of a batch counts (begun, decided,
checkpointed or recorded on its row): refusing wrongly costs a save mode, following wrongly keeps
its old rows beside the ones it writes again.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from seatide.store import schema as s
from seatide.store.restore import run_first_incarnation


def wrote_before(conn, job_id: str, pipeline_id: int, began: int) -> bool:
    """Whether ``pipeline_id`` began, decided or committed a batch in an incarnation of the job's run
    before ``began`` (the fresh start's)."""
    job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()
    if job is None:
        return True
    first = run_first_incarnation(conn, job)
    p, m, c = s.pipelines.c, s.sink_manifests.c, s.checkpoints.c
    found = [
        select(p.pipeline_id).where(and_(p.job_id == job_id, p.pipeline_id == pipeline_id, p.incarnation >= first,
                                         p.incarnation < began,
                                         or_(p.started_batch.isnot(None), p.last_batch_id.isnot(None)))),
        select(m.pipeline_id).where(and_(m.job_id == job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0,
                                         m.incarnation >= first, m.incarnation < began)),
        select(c.pipeline_id).where(and_(c.job_id == job_id, c.pipeline_id == pipeline_id,
                                         c.incarnation >= first, c.incarnation < began)),
    ]
    return any(conn.execute(query.limit(1)).first() is not None for query in found)


__all__ = ["wrote_before"]
