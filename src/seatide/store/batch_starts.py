"""The newest batch a pipeline began writing to its sinks, and the checkpoint lineage it ran under.

A sink that commits in its own system (``decided_in_store`` False: Jdbc, Redis, Http) keeps its
record of a batch in its target, not in the store: before this, nothing in the store said it had
committed a batch after the last checkpoint row, and a checkpoint directory put back from a backup
taken before that batch was planned was accepted; the batch was planned again with other boundaries
and written twice or lost (outside review 3). The driver calls every sink, so before the first sink
write of each batch it records the batch here, fenced by its attempt; ``store/decided_batches.py``
counts it like a decided batch: the directory must hold its plan (``offsets/N``) and its lineage.

One row per pipeline and incarnation (two columns of ``pipelines``, revision 0015): a write per
batch, nothing for retention to prune (the row goes with the job's history). Within a lineage the
number only grows: a replay of an older batch (a backup that holds its plan) keeps the newest.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, case, select, update

from seatide.store import schema as s


@dataclass(frozen=True)
class Started:
    incarnation: int
    batch: int
    lineage: str


def record_start(conn, pipeline_row, batch_id: int, lineage: str) -> None:
    """Batch ``batch_id`` of ``lineage`` begins (``pipeline_row``: the where clause of the attempt's
    pipeline row; the caller's transaction is fenced by its attempt)."""
    p = s.pipelines.c
    newer = and_(p.started_lineage == lineage, p.started_batch > batch_id)
    conn.execute(update(s.pipelines).where(pipeline_row).values(
        started_batch=case((newer, p.started_batch), else_=batch_id), started_lineage=lineage))


def newest_start(conn, job_id: str, pipeline_id: int, since_incarnation: int) -> Started | None:
    """The newest batch begun by an incarnation from ``since_incarnation`` on, or None."""
    p = s.pipelines.c
    row = conn.execute(select(p.incarnation, p.started_batch, p.started_lineage).where(and_(
        p.job_id == job_id, p.pipeline_id == pipeline_id, p.incarnation >= since_incarnation,
        p.started_batch.isnot(None))).order_by(p.incarnation.desc()).limit(1)).first()
    return None if row is None else Started(row.incarnation, row.started_batch, row.started_lineage)
