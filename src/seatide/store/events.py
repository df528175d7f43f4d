"""The event log: one append, in the caller's transaction.

Apart from ``db.py`` because a migration records its upgrade here, and ``db.py`` opens a
store by migrating it: with this in ``db.py`` the two modules imported each other.
"""

from __future__ import annotations

import json

from sqlalchemy import and_, case, func, insert, select
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.clock import store_now


def record_event(conn: Connection, kind: str, actor: str, job_id: str | None = None,
                 incarnation: int | None = None, epoch: int | None = None, *, run_id=None,
                 **detail) -> None:
    """Append to the event log, in the caller's transaction (so the log never lies), at the
    store's time (events are listed and pruned by it). ``run_id``: the run the event is about;
    by default the job's current run, which every fenced writer acts for (a cleanup or expiry
    of an earlier run names it, a worker's event about a driver names its incarnation's:
    ``run_of_incarnation``)."""
    run = run_id
    if run is None and job_id is not None:
        run = select(s.jobs.c.run_id).where(s.jobs.c.job_id == job_id).scalar_subquery()
    conn.execute(insert(s.events).values(
        at=store_now(conn), job_id=job_id, incarnation=incarnation, run_id=run, kind=kind,
        detail=json.dumps(detail, default=str), epoch=epoch, actor=actor))


def run_of_incarnation(job_id: str, incarnation: int):
    """The run an incarnation of a job id was part of, as a subquery for ``record_event``: a worker
    reaps or launches the driver of an earlier run after the id was submitted again (review 30, F7).
    An earlier run's last incarnation has its result, with its run (that is what let the id be
    submitted again; ``store/restore.py`` ``run_first_incarnation``), so the first result at or
    after the incarnation names it; with none, the incarnation is the current run's."""
    r = s.job_results.c
    first = select(func.min(r.incarnation)).where(and_(r.job_id == job_id, r.incarnation >= incarnation))
    of_result = select(r.run_id).where(and_(r.job_id == job_id, r.incarnation == first.scalar_subquery()))
    current = select(s.jobs.c.run_id).where(s.jobs.c.job_id == job_id)
    return case((first.scalar_subquery().is_not(None), of_result.scalar_subquery()),
                else_=current.scalar_subquery())
