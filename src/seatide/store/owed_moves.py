"""Checkpoint moves a resume decided and its incarnation never made: the next resume owes them.

A resume only records, per pipeline, what its directory must become (``jobs.restore``'s
``prepare``: a savepoint's directory to copy in, or None for an empty one); the incarnation's
driver makes it so before the pipeline starts and marks the directory (``runtime/checkpoint_move``,
``store.runs.PREPARED_MARK``). An incarnation that ends before its driver got there (cancelled
while it waited for a worker, its driver killed at start) leaves the directory as it was.

A move is owed only on positive evidence that it was not made: the store holds no checkpoint row
of that incarnation for the pipeline (its driver records one, of any status, only after the move),
and the directory is there and its mark names another incarnation, or none. A directory the
resuming process cannot see (an NFS mount absent, a directory renamed) is no evidence: the move
may well have been made and the directory hold live progress, so the resume plans as if nothing
were owed, and refuses there as a missing checkpoint (``store/restore.py``).

What an owed move becomes:

* a fresh start a release forced stays a fresh start, without ``--fallback fresh`` asked again:
  the old positions are gone for good (``coordinator/release.py``, ``store/release_line.py``);
* any other fresh start (``--fallback fresh`` for a problem that may since be fixed) is planned
  again from the directory in place: restored if it now fits, refused (or started over with
  ``--fallback fresh``) if not, and the answer says it was re-planned;
* a savepoint's copy stays that copy, checked as that savepoint named again would be, unless the
  user names a savepoint now: the newer word wins.

A mark is read only where its answer decides something: not when a savepoint is named, nor for a
released job (both say what the directory becomes whatever it holds). A mark that cannot be read
is a problem of that pipeline (``UnreadableMark``): refused, or started over with ``--fallback fresh``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.runs import PREPARED_MARK, read_mark
from seatide.store.states import PipelineStatus


class UnreadableMark(RestoreRefused):
    """A pipeline directory's mark that cannot be read: the problem of that pipeline."""


@dataclass(frozen=True)
class OwedMove:
    incarnation: int            # the one that decided it and never made it
    source: str | None          # the savepoint directory to copy in; None: start over
    reason: str | None = None   # a fresh start's first reason (a carried one keeps it)
    released: bool = False      # a fresh start forced by a release: the old positions are gone
    unreadable: str | None = None   # its mark cannot be read: whether it was made is unknown
    moved_by: int | None = None     # the directory in place: the incarnation whose move made it (its mark)
    never_held: int | None = None   # a copy from this savepoint, which does not hold the pipeline (savepoint_scope.py)
    began: int | None = None        # a fresh start carried before: the incarnation that first decided it

    @property
    def decided_by(self) -> int:
        """The incarnation whose resume decided it first: a fresh start carried on, or started over
        again when re-planned, keeps that decision's save-mode scope (``store.runs.began_anew``)."""
        return self.incarnation if self.began is None else self.began

    @property
    def carried_fresh(self) -> bool:
        """A fresh start carried on as decided: only a release's (its positions are gone)."""
        return self.source is None and self.released


def marked_by(pipeline_directory: str) -> int | None:
    """The incarnation whose move made the directory (its mark), None when it has none. A mark
    that cannot be read raises ``UnreadableMark``, naming it: what it says decides what the resume does."""
    mark = os.path.join(pipeline_directory, PREPARED_MARK)
    try:
        return read_mark(pipeline_directory)
    except (OSError, ValueError) as exc:
        raise UnreadableMark(
            f"its directory's mark {mark} cannot be read ({exc}); it says which resume's checkpoint move the "
            "directory holds. Fix its storage and resume again; if the directory's contents are sound, remove the "
            "mark (the resume then takes the move as not made, when no checkpoint of the last incarnation was "
            "recorded)") from None


def owed_moves(conn, job, pipelines: dict) -> dict[int, OwedMove]:
    """The moves ``job``'s current incarnation decided and surely never made, by pipeline id
    (``pipelines``: its pipeline rows by id). A FINISHED pipeline owes nothing: it ran."""
    decided = json.loads(job.restore or "{}")
    if not decided.get("prepare"):
        return {}
    c = s.checkpoints.c
    recorded = set(conn.execute(select(c.pipeline_id).where(and_(
        c.job_id == job.job_id, c.incarnation == job.incarnation)).distinct()).scalars())
    fresh = {entry["pipeline"]: entry for entry in decided.get("fresh", [])}
    owed = {}
    for key, source in decided["prepare"].items():
        row = pipelines.get(int(key))
        if row is None or row.status == PipelineStatus.FINISHED or int(key) in recorded \
                or not os.path.isdir(row.checkpoint_dir):
            continue
        try:
            moved_by, unreadable = marked_by(row.checkpoint_dir), None
        except UnreadableMark as exc:
            moved_by, unreadable = None, str(exc)
        if moved_by == job.incarnation:
            continue
        entry = fresh.get(int(key), {})
        owed[int(key)] = OwedMove(job.incarnation, source, entry.get("reason", entry.get("problem")),
                                  bool(entry.get("released")), unreadable, moved_by, began=entry.get("began"))
    return owed


def batch_in_place(conn, job_id: str, pipeline_id: int, owed: OwedMove, first_incarnation: int) -> int | None:
    """The newest batch the directory an owed fresh start left in place holds, as the store recorded it.

    No move was made there since its mark's incarnation (or ever, with no mark), so every batch
    committed from then on was committed in it: the newest such checkpoint row (retention keeps the
    newest completed one of each incarnation), or the batch its move put there (a savepoint's copy:
    that incarnation's row). Fresh starts that never ran in between record no batch, however many."""
    since = first_incarnation if owed.moved_by is None else owed.moved_by
    c = s.checkpoints.c
    batch = conn.execute(select(func.max(c.batch_id)).where(and_(
        c.job_id == job_id, c.pipeline_id == pipeline_id, c.kind == "CHECKPOINT", c.status == "COMPLETED",
        c.incarnation >= since))).scalar()
    if owed.moved_by is not None:
        p = s.pipelines.c
        made = conn.execute(select(p.last_batch_id).where(and_(
            p.job_id == job_id, p.pipeline_id == pipeline_id, p.incarnation == owed.moved_by))).scalar()
        batch = made if batch is None else batch if made is None else max(batch, made)
    return batch


def decided_moves(job) -> set[int]:
    """The pipelines ``job``'s current incarnation decided a checkpoint move for, made or not."""
    return {int(key) for key in json.loads(job.restore or "{}").get("prepare", {})}


def carried_fresh(owed: OwedMove) -> str:
    """The problem text of a carried fresh start: the event's and the resume's answer."""
    return (f"incarnation {owed.incarnation} was to start it over, and its driver never did (it ended first): it "
            f"still starts over, as decided then, without --fallback fresh asked again; the reason: {owed.reason}")


def carried_copy(owed: OwedMove) -> str:
    return (f"incarnation {owed.incarnation} was to restore it from {owed.source}, and its driver never copied it "
            "in (it ended first): it is restored from there, as decided then (name a savepoint to choose another)")


def owed_copy_problem(owed: OwedMove, problem: str | None) -> str | None:
    """What is wrong with the owed savepoint copy, said of that savepoint."""
    if problem is None:
        return None
    savepoint = os.path.basename(os.path.dirname(owed.source.rstrip("/")))
    return (f"incarnation {owed.incarnation} was to restore it from savepoint {savepoint} and never did; that "
            f"savepoint cannot restore it now: {problem} (name another savepoint with --from)")


def replanned(owed: OwedMove, problem: str | None) -> str:
    """What the answer says of a fresh start no release forced, planned again."""
    now = f"it is restored from the checkpoint in place" if problem is None else f"now: {problem}"
    if owed.never_held is not None:
        return (f"incarnation {owed.incarnation} was to restore it from savepoint {owed.never_held}, which does not "
                "hold it (it had not finished when that savepoint was taken, or it ran again after it had), and never "
                f"could; it was re-planned from its directory: {now}")
    return (f"incarnation {owed.incarnation} was to start it over ({owed.reason}) and its driver never did; no "
            f"release forced it, so it was re-planned from its directory: {now}")
