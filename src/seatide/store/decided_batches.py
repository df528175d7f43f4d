"""A batch a sink decided counts as a checkpoint its pipeline's directory must keep (outside review, F1).

A batch's decision (its sink's manifest in the store, ``runtime/commit_log.py``) is made before the
store's checkpoint row for it: a driver that dies in between leaves a batch written to the sink
that no checkpoint row records. What a replay needs of it is in the directory: ``seatide.json``,
whose lineage is in the batch's transaction id. Replayed under that lineage the batch is found
decided, and nothing is written again. A directory without it (gone, or put back from a backup
taken before the pipeline first started) begins a new lineage, whose batches no decision knows:
the batch would be written to the sink twice. Counting only checkpoint rows, a resume accepted
that directory whenever the batch was the pipeline's first, and so did a driver's next attempt.

So the sinks' decisions since the directory was made count too (since the fresh start whose move
made it, ``store/fresh_made.py``; else since the run began): a pipeline with one needs its
directory's metadata, checkpoint row or not. It cannot go on from the decided batch instead: the
source positions that batch ended at are in the lost directory's Spark log only.

Not seen here: a sink that commits in its own system (a database's commit record, Jdbc) decides
nothing in the store.
"""

from __future__ import annotations

import os

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.fresh_made import fresh_made_by


def newest_decided(conn, job, pipeline_id: int, directory: str, first_incarnation: int) -> int | None:
    """The newest batch the pipeline's sinks decided since ``directory`` was made, or None."""
    made_by = fresh_made_by(directory, first_incarnation, job.incarnation)
    m = s.sink_manifests.c
    return conn.execute(select(func.max(m.batch_id)).where(and_(
        m.job_id == job.job_id, m.pipeline_id == pipeline_id, m.batch_id >= 0,       # -1: a save mode's
        m.incarnation >= (first_incarnation if made_by is None else made_by)))).scalar()


def decided_in_place(conn, job, pipelines: dict, first_incarnation: int) -> dict[int, int]:
    """{pipeline id: its newest decided batch} of the pipelines (rows with a ``checkpoint_dir``)."""
    found = {pid: newest_decided(conn, job, pid, row.checkpoint_dir, first_incarnation)
             for pid, row in pipelines.items()}
    return {pid: batch for pid, batch in found.items() if batch is not None}


def lost_lineage(directory: str, batch: int | None) -> str | None:
    """Why the pipeline cannot start on ``directory`` when its sinks decided ``batch``, or None."""
    if batch is None or os.path.isfile(os.path.join(directory, "seatide.json")):
        return None
    what = "is missing" if not os.path.isdir(directory) else "holds no SeaTide checkpoint (seatide.json is missing)"
    return (f"its sinks committed batch {batch}, which no checkpoint records yet, but its checkpoint directory "
            f"{directory} {what} (a backup from before it was put back?): started from there, the pipeline would "
            f"begin a new lineage, and batch {batch} and every batch before it would be written to its sinks again. "
            f"Put back a newer backup of the directory, one taken after batch {batch} was committed")
