"""Which checkpoints a pipeline's directory in place must hold: those completed since it was made.

A resume checks that the directory it restores in place holds a checkpoint when the pipeline
completed one (``store/restore.py``, ``inspect_checkpoint``): a directory that lost it must not
silently start over. But a fresh start made by a later incarnation's driver set the old directory
aside and made an empty one (``runtime/checkpoint_move.py``): the checkpoints completed before
that move were the old directory's, not this one's. Counting them refused a plain resume of an
incarnation cancelled before its first checkpoint, although the empty directory is exactly what
that incarnation started from (found by an outside review).

So the count begins at the move that made the directory, on positive evidence only: its mark,
readable, naming an incarnation of this run up to the current one, and recording an empty
directory (a fresh start, ``from`` null). Anything else (no mark, an unreadable one, a savepoint's
copy, a directory out of sight) counts every checkpoint of the run, as before. Whether a directory
made before a release may be restored at all is the release line's question
(``store/release_line.py``), asked after this one.
"""

from __future__ import annotations

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.runs import PREPARED_MARK, read_move


def fresh_made_by(directory: str, first_incarnation: int, incarnation: int) -> int | None:
    """The incarnation of the run whose fresh start made ``directory`` (empty, marked), else None."""
    try:
        move = read_move(directory)
    except (OSError, ValueError):
        return None        # no evidence: every checkpoint of the run counts
    if move is None or not move[1] or not isinstance(move[0], int):
        return None
    return move[0] if first_incarnation <= move[0] <= incarnation else None


def unreadable_mark(directory: str, problem: str = "") -> str | None:
    """For a refusal of the directory in place: its mark, when it cannot be read, may be why (a
    fresh start's mark excuses an empty directory), and the user must be told to look there (unless
    the ``problem`` already names it)."""
    if PREPARED_MARK in problem:
        return None
    try:
        read_move(directory)
    except (OSError, ValueError) as exc:
        return (f"; its checkpoint move's mark {directory}/{PREPARED_MARK} is unreadable ({exc}): if a fresh "
                "start made this directory, put the mark back or start over with --fallback fresh")
    return None


def checkpointed(conn, job, pipelines: dict, first_incarnation: int, read_marks: bool) -> tuple[set[int], dict]:
    """The pipelines whose directory in place must hold a checkpoint (one completed since the move
    that made it, or in the run), and those excused: made empty by a fresh start with no checkpoint
    completed since, though earlier ones were ({pipeline id: the incarnation that made it}).
    ``read_marks``: False where the marks decide nothing (a savepoint named, a released job)."""
    c = s.checkpoints.c
    newest = dict(conn.execute(select(c.pipeline_id, func.max(c.incarnation)).where(and_(
        c.job_id == job.job_id, c.status == "COMPLETED", c.kind == "CHECKPOINT",
        c.incarnation >= first_incarnation)).group_by(c.pipeline_id)).all())
    excused = {}
    for pipeline_id in set(newest) & set(pipelines) if read_marks else ():
        made_by = fresh_made_by(pipelines[pipeline_id].checkpoint_dir, first_incarnation, job.incarnation)
        if made_by is not None and newest[pipeline_id] < made_by:
            excused[pipeline_id] = made_by
    return set(newest) - set(excused), excused


def made_empty(made_by: int) -> str:
    """What the resume's answer says of a directory excused: restored as it is, not a fallback."""
    return (f"its directory holds the fresh start incarnation {made_by} made, and no checkpoint completed since: "
            "it resumes from that empty directory, its latest checkpoint, and so starts over as that fresh start did")
