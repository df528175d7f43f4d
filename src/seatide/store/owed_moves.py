"""Checkpoint moves a resume decided and its incarnation never made: the next resume owes them.

A resume only records, per pipeline, what its directory must become (``jobs.restore``'s
``prepare``: a savepoint's directory to copy in, or None for an empty one); the incarnation's
driver makes it so before the pipeline starts and marks the directory (``runtime/checkpoint_move``,
``store.runs.prepared_for``). An incarnation that ends before its driver got there (cancelled
while it waited for a worker, its driver killed at start) leaves the directory as it was: the old
offsets, or the live checkpoint a savepoint was to replace. Those are not the job's latest
checkpoint: its latest decision was to start over, or to go back to the savepoint. So a resume
of that incarnation carries the decision on, as the incarnation owed it:

* a fresh start stays a fresh start, without ``--fallback fresh`` asked again (the user chose it)
  and said so, with the first reason kept: a release's fresh start above all, whose old
  positions are gone (``coordinator/release.py``), so even a savepoint named now does not bring
  them back (a savepoint taken before the release holds the dropped slot's positions);
* a savepoint's copy stays that copy, unless the user names a savepoint now: the newer word wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from seatide.store.runs import prepared_for
from seatide.store.states import PipelineStatus


@dataclass(frozen=True)
class OwedMove:
    incarnation: int            # the one that decided it and never made it
    source: str | None          # the savepoint directory to copy in; None: start over
    reason: str | None = None   # a fresh start's first reason (a carried one keeps it)
    released: bool = False      # a fresh start forced by a release: the old positions are gone


def owed_moves(job, pipelines: dict) -> dict[int, OwedMove]:
    """The moves ``job``'s current incarnation decided and never made, by pipeline id
    (``pipelines``: its pipeline rows by id). A FINISHED pipeline owes nothing: it ran."""
    decided = json.loads(job.restore or "{}")
    fresh = {entry["pipeline"]: entry for entry in decided.get("fresh", [])}
    owed = {}
    for key, source in decided.get("prepare", {}).items():
        row = pipelines.get(int(key))
        if row is None or row.status == PipelineStatus.FINISHED or prepared_for(row.checkpoint_dir) == job.incarnation:
            continue
        entry = fresh.get(int(key), {})
        owed[int(key)] = OwedMove(job.incarnation, source, entry.get("reason", entry.get("problem")),
                                  bool(entry.get("released")))
    return owed


def carried_fresh(owed: OwedMove) -> str:
    """The problem text of a carried fresh start: the event's and the resume's answer."""
    return (f"incarnation {owed.incarnation} was to start it over, and its driver never did (it ended first): it "
            f"still starts over, as decided then, without --fallback fresh asked again; the reason: {owed.reason}")


def carried_copy(owed: OwedMove) -> str:
    return (f"incarnation {owed.incarnation} was to restore it from {owed.source}, and its driver never copied it "
            "in (it ended first): it is restored from there, as decided then (name a savepoint to choose another)")
