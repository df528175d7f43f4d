"""A release is a line no restore crosses: what was taken before it holds positions that are gone.

A cancel and release (``coordinator/release.py``) drops what the job's sources hold on their
servers (a Postgres-CDC replication slot), so the positions of every checkpoint and savepoint of
the incarnations up to the released one cannot be read again: a slot made later under the same
name starts at the server's present and would silently skip the changes in between. The first
resume after it starts every pipeline over (``store/restore.py``); this module keeps the line
for the resumes after that one, which no longer see ``jobs.release`` (a resume clears it):

* the released incarnation is carried in ``jobs.restore`` (``release_incarnation``) from resume
  to resume, written in the resume's own transaction, so it lasts as long as the job's row;
  the SOURCES_RELEASED event finds it for a job resumed before this was recorded (retention never
  prunes that event, ``coordinator/retention.py``: it is this line's only record there);
* a savepoint (or checkpoint row) of an incarnation up to the line is refused by name;
* a pipeline's directory in place is past the line only when a move of a later incarnation
  made it (its mark, ``store.runs.PREPARED_MARK``): the release's fresh start, or a later
  savepoint's copy. One without such a mark (a backup put back, say) is refused.
"""

from __future__ import annotations

import json
import os

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.owed_moves import OwedMove, UnreadableMark, marked_by


def last_release(conn, job, first_incarnation: int) -> int | None:
    """The incarnation of the job's current run whose sources were last released, or None."""
    if job.release is not None:      # released (or being released) now: this incarnation
        return job.incarnation
    carried = json.loads(job.restore or "{}").get("release_incarnation")
    if carried is not None:
        return carried
    e = s.events.c
    return conn.execute(select(func.max(e.incarnation)).where(and_(
        e.job_id == job.job_id, e.kind == "SOURCES_RELEASED", e.incarnation >= first_incarnation))).scalar()


def _how(job_id: str) -> str:
    return (f"Start it over with a new snapshot: seatide resume {job_id} --fallback fresh (REST: \"fallback\": "
            f"\"fresh\"), or name a later savepoint (seatide checkpoints {job_id} lists them)")


def refuse_savepoint_before(job_id: str, savepoint, released: int | None) -> None:
    """A savepoint taken at or before the released incarnation holds the dropped positions."""
    if released is not None and savepoint.incarnation <= released:
        raise RestoreRefused(
            f"cannot resume job {job_id} from savepoint {savepoint.checkpoint_id}: it was taken at incarnation "
            f"{savepoint.incarnation}, and the job's sources were released at incarnation {released} (cancel and "
            "release: a replication slot dropped), so the positions it holds cannot be read again; restoring it "
            f"would skip the changes in between. {_how(job_id)}")


def before_release(directory: str, moved_by: int | None, released: int, owed_by: int | None = None) -> str | None:
    """Why a pipeline's directory in place cannot be restored because of the release, or None.
    ``moved_by``: the incarnation whose move made the directory (its mark), None: no mark.
    ``owed_by``: a later incarnation that was to start it over and never did (a resume recorded
    before the 'released' flag was: its fresh start looks like any other), which is then the cause."""
    if moved_by is not None and moved_by > released:
        return None
    made = f"was last made by incarnation {moved_by}" if moved_by is not None else "has no mark of a move"
    why = ("a directory put back from a backup?" if owed_by is None else
           f"incarnation {owed_by} was to start it over and its driver never did")
    return (f"its checkpoint in {directory} {made}, not after the job's sources were released at incarnation "
            f"{released}: its positions cannot be read again ({why}); it can only start over")


def in_place_problem(directory: str, released: int | None, owes: OwedMove | None) -> str | None:
    """Why a pipeline's directory in place, which a move decided by the last resume or a release
    concerns, cannot be restored, or None.

    One the resume cannot see is refused, checkpoint row or not: a pipeline that never completed a
    batch may still hold Spark's offsets of the dropped slot (offsets/0), or the move's outcome, and
    its driver would restore them in place. Its mark is read only when a release draws the line."""
    if not os.path.isdir(directory):
        return (f"its checkpoint directory {directory} is not visible from here, and what it holds decides the "
                "restore (" + ("the job's sources were released" if released is not None else
                               "the last resume decided a checkpoint move for it") +
                "): check the mount (an NFS mount absent, a directory renamed) and resume again")
    if released is None:
        return None
    try:
        moved_by = marked_by(directory)
    except UnreadableMark as exc:
        return str(exc)
    return before_release(directory, moved_by, released, None if owes is None else owes.incarnation)
