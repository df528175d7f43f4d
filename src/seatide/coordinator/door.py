"""The one door of the leader's destructive steps: cleanup, history expiry, slot release.

A step that deletes or drops (a run's pipeline directories, a driver put down, a replication
slot) is decided on rows read earlier, and a leader may stall between the read and the step
for as long as it likes: across the run's cleanup, its expiry, the forgetting of its rows and
a resubmission of the same job id (issue 30, finding 5). The new run is again incarnation 1,
so an incarnation says nothing: only the run id does (``store/runs.py``).

So every such step goes through ``destructive_step``:

* it opens a leader transaction (``Store.leader_tx``: a former leader is refused there);
* it locks the job row, and re-reads the row the step was decided on (``fence``), comparing
  the run id and the state the decision needs; a step whose row moved on is ``StepOverruled``
  and does nothing;
* the step runs inside that transaction, so no resume, forget or resubmission of the job id
  can land between the check and the step (they write the locked row; on SQLite every write
  waits for the transaction);
* a path it removes must lie in the run's own directory (``owned_paths``);
* a step that reaches outside the store (a slot drop) answers within a bound
  (``source_release.OUTSIDE_WAIT_S``, 1 s a statement) and never waits inside the door for what
  another holds: a slot a walsender still holds fails the step, which is retried on a later
  tick with backoff. The door's transaction holds the job row, on SQLite the whole store's write
  lock, and the leader's tick (its lease renewal too) waits for it: a slot drop waiting 10 s
  there made every driver on a SQLite store fence itself (6 s without a heartbeat) and the
  leader lose its lease. The check and the drop stay in one transaction, so no resume, forget
  or resubmission can land between them; a marker committed first and the drop done outside
  the lock would have needed every such write (another job's submission naming the same
  user-named slot among them) to look for the marker.

The sinks' destructive steps (save modes, staging tables) have their own door, fenced by the
attempt: ``plugin/save_mode_door.py``'s ``SaveModeDoor``. ``docs/operations.md`` lists every
destructive step and its fence.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from seatide import failpoints
from seatide.store import schema as s
from seatide.store.db import Store


class StepOverruled(Exception):
    """The row a destructive step was decided on is gone or names another run: nothing is done."""


@dataclass(frozen=True)
class DecidedFor:
    """The run (and its incarnation) a destructive step was decided for."""
    job_id: str
    run_id: str | None
    incarnation: int


@dataclass(frozen=True)
class Opened:
    conn: Connection
    job: Any                  # the job id's row, locked (None: forgotten)
    row: Any                  # what the fence re-read (a job result, or the job row)


Fence = Callable[[Connection, Any, DecidedFor], Any]


@contextlib.contextmanager
def fenced_read(store: Store, epoch: int, decided: DecidedFor, fence: Fence) -> Iterator[Opened]:
    """Re-read what a step was decided on, in a leader transaction holding the job row."""
    with store.leader_tx(epoch) as conn:
        query = select(s.jobs).where(s.jobs.c.job_id == decided.job_id)
        job = conn.execute(query if store.is_sqlite else query.with_for_update()).first()
        yield Opened(conn, job, fence(conn, job, decided))


@contextlib.contextmanager
def destructive_step(store: Store, epoch: int, decided: DecidedFor, fence: Fence) -> Iterator[Opened]:
    """Run a destructive step (the body) in a leader transaction that holds the job row and has
    checked, with ``fence``, that what the step was decided for is still there and of the same
    run. The body's store writes commit with the check, or not at all."""
    failpoints.hit("coordinator.destructive_step")
    with fenced_read(store, epoch, decided, fence) as opened:
        yield opened


def result_of_run(*states: str) -> Fence:
    """The job result the step was decided on still exists, is of the same run and in one of
    ``states``. Rows keyed by its job id and incarnation are then that run's: a later run of
    the id reuses an incarnation only after this result was forgotten."""
    def fence(conn: Connection, job, decided: DecidedFor):
        r = s.job_results.c
        query = select(s.job_results).where(and_(r.job_id == decided.job_id, r.incarnation == decided.incarnation))
        row = conn.execute(query if conn.dialect.name == "sqlite" else query.with_for_update()).first()
        if row is None or row.run_id != decided.run_id or row.cleanup not in states:
            raise StepOverruled(f"the result of incarnation {decided.incarnation} of run {decided.run_id} is "
                                f"{'gone' if row is None else f'of run {row.run_id}, {row.cleanup}'}")
        return row
    return fence


def job_at(**expected) -> Fence:
    """The job row is still the decided run's, at the decided incarnation, with ``expected``
    column values (a release: ``release='RELEASING'``): a fresh resume keeps the run and moves
    the incarnation on, and its new slot has the old one's name."""
    def fence(conn: Connection, job, decided: DecidedFor):
        if job is None or (job.run_id, job.incarnation) != (decided.run_id, decided.incarnation) or \
                any(getattr(job, name) != value for name, value in expected.items()):
            raise StepOverruled(f"job {decided.job_id} is no longer incarnation {decided.incarnation} of run "
                                f"{decided.run_id} with {expected}")
        return job
    return fence


def current_run(job, decided: DecidedFor) -> bool:
    """The locked job row is the decided incarnation of the decided run."""
    return job is not None and (job.incarnation, job.run_id) == (decided.incarnation, decided.run_id)


def owned_paths(decided: DecidedFor, paths: tuple[str, ...]) -> tuple[str, ...]:
    """``paths``, each checked to lie in the decided run's own directory (a job from before
    runs, with no run id, keeps them in the job's)."""
    mark = decided.run_id or decided.job_id
    for path in paths:
        if mark not in os.path.normpath(path).split(os.sep):
            raise StepOverruled(f"{path} is not in the directory of run {mark} of job {decided.job_id}")
    return paths
