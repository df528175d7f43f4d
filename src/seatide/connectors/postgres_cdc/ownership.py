"""Whose a replication slot is, told by the mark SeaTide writes on the publication of its name.

A slot the user names (``slot.name``) may be another consumer's (pg_recvlogical, Debezium), or
another SeaTide job's, given the same slot.name by a copy-paste. Dropping it, to start afresh or
at a release, loses the changes that consumer has not read yet and its position. SeaTide makes
the publication with the slot and comments it with the run it made them for (``mark``); read
back (``owner``), the publication says:

* nothing (neither the slot nor the publication is there): free;
* no SeaTide mark (the publication missing, or commented otherwise): another consumer's, never dropped;
* ``OLD_MARK`` (written before marks named a run): SeaTide's, whose is not known: the job that
  resumes it takes it as its own, as before, and a release keeps it while another run names it
  (the coordinator's ``keep``, coordinator/source_release.py);
* a run key (store/runs.py): that run's. A job id lives in one run at a time, so another run of
  the same job id is a dead one, or the job id's current run, which the release's ``keep`` stands
  for; a run of another job id may be running now.

So a fresh start is refused on another job's slot (``fresh_start_refusal``), a job's own resume
never is, and a release leaves another job's (``release_leaves``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from psycopg import sql

from seatide.store.runs import job_of

OLD_MARK = "seatide: made by SeaTide for a Postgres-CDC source, with the replication slot of its name"
_MARK = "seatide: made by SeaTide for the Postgres-CDC source of job run {run}, with the replication slot of its name"
_MARKED_RUN = re.compile(re.escape(_MARK).replace(re.escape("{run}"), r"([A-Za-z0-9._-]+)"))


class Held(Enum):
    FREE = "free"
    FOREIGN = "another consumer's"
    OLD = "SeaTide's, by a version whose mark names no run"
    RUN = "a SeaTide run's"


@dataclass(frozen=True)
class Owner:
    held: Held
    run: str | None = None      # the run key the mark names (Held.RUN)


def mark(conn, name: str, run: str) -> None:
    """Mark publication ``name`` as made, with its slot, for run ``run`` (a run key)."""
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(
        sql.Identifier(name), sql.Literal(_MARK.format(run=run))))


def owner(conn, name: str) -> Owner:
    there, comment = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = %s), "
        "(SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication WHERE pubname = %s)",
        (name, name)).fetchone()
    if not there and comment is None:
        return Owner(Held.FREE)
    if comment == OLD_MARK:
        return Owner(Held.OLD)
    found = _MARKED_RUN.fullmatch(comment or "")
    return Owner(Held.RUN, found.group(1)) if found else Owner(Held.FOREIGN)


def fresh_start_refusal(conn, name: str, run: str) -> str | None:
    """Why run ``run``'s fresh start must not drop and recreate slot.name ``name``; None: it may."""
    found = owner(conn, name)
    if found.held is Held.FOREIGN:
        return _foreign(name)
    if found.held is Held.RUN and job_of(found.run) != job_of(run):
        return _another_job(name, found.run)
    return None


def release_leaves(conn, name: str, run: str, keep: frozenset[str]) -> str | None:
    """Why the release of run ``run`` leaves slot.name ``name``; None: drop it. One this run marked
    is dropped even when another run names it (``keep``): another job's start is refused on it,
    and a later run of this job id drops and makes it again at its own fresh start."""
    found = owner(conn, name)
    if found.held is Held.FOREIGN:
        return _foreign(name)
    if found.held is Held.RUN and job_of(found.run) != job_of(run):
        return _another_job(name, found.run)
    if name in keep and found.run != run:
        return f"replication slot '{name}' (slot.name): another run still names it"
    return None


def _shown(run: str) -> str:
    job = job_of(run)
    return f"job '{job}'" + (f" (run {run[len(job) + 1:]})" if job != run else "")


def _drop_sql(name: str) -> str:
    return f"SELECT pg_drop_replication_slot('{name}'); DROP PUBLICATION IF EXISTS \"{name}\""


def _another_job(name: str, run: str) -> str:
    job = job_of(run)
    return (f"replication slot '{name}' (slot.name) belongs to SeaTide {_shown(run)}, which made it with the same "
            f"slot.name and may still read through it: dropping or recreating it would lose that job's unread "
            f"changes and its position, so SeaTide leaves it. Give this source a slot.name of its own; or, if job "
            f"'{job}' no longer runs (seatide list), drop the slot yourself: {_drop_sql(name)}")


def _foreign(name: str) -> str:
    return (f"replication slot '{name}' (slot.name) was not made by SeaTide (its publication '{name}' is missing or "
            "carries no SeaTide mark): it belongs to another consumer (pg_recvlogical, Debezium, a slot made by "
            "hand), whose unread changes dropping it would lose, so SeaTide neither drops nor recreates it. Give this "
            f"source a slot.name of its own or, if nothing reads the slot any more, drop it yourself: "
            f"{_drop_sql(name)}")


__all__ = ["Held", "OLD_MARK", "Owner", "fresh_start_refusal", "mark", "owner", "release_leaves"]
