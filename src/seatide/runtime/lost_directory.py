"""A driver asks the store whether its pipeline's directory is older than what the sinks decided.

A resume checks the directory it restores in place (``store/decided_batches.py``), but the same
incarnation's next attempt (a retry) starts on whatever the directory holds then: lost and made
again, put back from a backup after the sinks had decided a batch that no checkpoint row records
yet, or a savepoint's copy made again by ``checkpoint_move.prepare_checkpoint`` (a new lineage)
after the first copy's branch had decided batches. No resume checked it, and started there the
pipeline would write decided batches again, or skip a batch planned anew. The attempt fails
instead, as nothing but the operator can fix it. So does one whose ``seatide.json`` was hand-edited
or corrupted (store/checkpoint_metadata.py), whatever the sinks decided.
"""

from __future__ import annotations

from sqlalchemy import select

from seatide.plugin.base import PermanentError
from seatide.store import schema as s
from seatide.store.checkpoint_metadata import checkpoint_metadata
from seatide.store.decided_batches import lost_lineage, newest_decided
from seatide.store.restore import run_first_incarnation


def refuse_lost_lineage(reporter, pipeline_id: int, directory: str, micro_batch: bool) -> None:
    """Raise ``PermanentError`` when ``directory`` cannot replay what the pipeline's sinks decided
    (``reporter``: the attempt's; ``micro_batch``: the pipeline runs checkpointed), or holds an unreadable
    seatide.json."""
    def newest(conn):
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == reporter.job_id)).first()
        return newest_decided(conn, job, pipeline_id, directory, run_first_incarnation(conn, job), micro_batch)

    lost = lost_lineage(directory, reporter.read(newest), micro_batch)
    if lost is None:
        try:
            checkpoint_metadata(directory)
        except ValueError as exc:
            lost = f"its checkpoint metadata {exc}: put back a readable copy of that file"
    if lost is not None:
        raise PermanentError(f"pipeline {pipeline_id}: {lost}; or start it over explicitly once the job has "
                             f"failed: seatide resume {reporter.job_id} --fallback fresh")
