"""Whose a replication slot is, told by the mark SeaTide writes on the publication of its name.

A slot the user names (``slot.name``) may be another consumer's (pg_recvlogical, Debezium), or
another SeaTide job's, given the same slot.name by a copy-paste. Dropping it, to start afresh or
at a release, loses the changes that consumer has not read yet and its position. SeaTide makes
the publication with the slot and comments it with the run it made them for (``mark``, in the
transaction that creates the publication); read back (``owner``), the publication says:

* nothing (neither the slot nor the publication is there): free;
* a comment that is no SeaTide mark, or no publication beside the slot: another consumer's, never dropped;
* no comment at all (``UNMARKED``): a SeaTide before marks (08e5997) made it so, and so may another
  consumer: whose is not known;
* ``OLD_MARK`` (written before marks named a run): SeaTide's, whose is not known;
* a run key (store/runs.py): that run's.

Slots are the server's and publications a database's: a slot made in another database is told by the
publication there (``ELSEWHERE`` when that cannot be read: not known either).

Not known is never taken for free: a fresh start is refused on it, and a release never drops it, each
saying how to settle it. The job that made an ``OLD`` slot settles it by resuming from its checkpoint: a
checkpoint that has read through the slot (the slot confirmed no further than the checkpoint's position)
makes the resume mark it as its run's (``claim``). An ``UNMARKED`` one is never claimed: any consumer that
lags behind the checkpoint passes that test (review rev3), so only the user can say it is SeaTide's (by
commenting it with ``OLD_MARK``, then resuming). A release of an ``UNMARKED`` slot fails (``NotReleased``,
tried again); one of an ``OLD`` slot this run did not claim leaves it, as the release cannot tell the run
that read it from one refused on it (never its to release), and says so with the way to settle it
(``Leaving.settle``: the leader's RELEASE_LEFT_HELD event, review finding 4).

A fresh start is refused on another job's slot (``fresh_start_refusal``), a job's own resume never
is, and a release drops only what its own run marked (``release_leaves``): a later run of the job id
re-marks the slot at its fresh start and reads through it, and its own release drops it. The steps
that read a mark and act on it hold an advisory lock on the name (``name_lock``), so two starts (or a
start and a release) cannot both find the name free. An advisory lock is a database's: two sources of
one slot.name in two databases of a server are not kept apart by it (the second's check finds the first's
slot, ``ELSEWHERE`` or its mark, unless both check before either makes it).
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

import psycopg
from psycopg import sql

from seatide.connectors.postgres_cdc.pgoutput import format_lsn
from seatide.store.runs import job_of

log = logging.getLogger(__name__)

OLD_MARK = "seatide: made by SeaTide for a Postgres-CDC source, with the replication slot of its name"
_MARK = "seatide: made by SeaTide for the Postgres-CDC source of job run {run}, with the replication slot of its name"
_MARKED_RUN = re.compile(re.escape(_MARK).replace(re.escape("{run}"), r"([A-Za-z0-9._-]+)"))
_LOCK_CLASS = 0x5EA7        # the advisory locks' first key: SeaTide's slot names (the second: the name's hash)


class Held(Enum):
    FREE = "free"
    FOREIGN = "another consumer's"
    UNMARKED = "SeaTide's before marks, or another consumer's"
    OLD = "SeaTide's, by a version whose mark names no run"
    ELSEWHERE = "made in another database, whose publication could not be read"
    RUN = "a SeaTide run's"


@dataclass(frozen=True)
class Owner:
    held: Held
    run: str | None = None      # the run key the mark names (Held.RUN)
    database: str | None = None     # the slot's database (Held.ELSEWHERE) and why it could not be read
    why: str | None = None


@dataclass(frozen=True)
class Leaving:
    """Why a release leaves a slot.name; ``settle``: what ends it, when no SeaTide run's own release will
    (None: another run's does, or nothing is held), which the operator is told."""
    why: str
    settle: str | None = None


class NotReleased(Exception):
    """A release that found a slot it cannot tell is the run's: left, and the release not passed as done."""


@contextmanager
def name_lock(conn, name: str):
    """Hold the advisory lock of ``name`` on ``conn`` (autocommit) for the block: a session lock, not a
    transaction's, as the slot is made on a replication connection meanwhile, and creating a logical slot
    waits for every transaction that has written to end (a transaction held open here would never end).
    Not free at once: the holder is named in the log, and the wait has no bound of its own (another job
    making the slot behind open write transactions goes on until they end): a start that waits here holds
    back the save modes that would remove data (runtime/start_gate.py), a release's connection has a
    statement_timeout."""
    if not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_LOCK_CLASS, name)).fetchone()[0]:
        _say_lock_holder(conn, name)
        conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_LOCK_CLASS, name))
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_LOCK_CLASS, name))


def _say_lock_holder(conn, name: str) -> None:
    row = conn.execute("SELECT l.pid, a.application_name, a.state, to_char(a.state_change AT TIME ZONE 'UTC', "
                       "'YYYY-MM-DD HH24:MI:SS') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
                       "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = "
                       "hashtext(%s)::oid AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE "
                       "datname = current_database())", (_LOCK_CLASS, name)).fetchone()
    who = (f"PID {row[0]} (application_name '{row[1]}', {row[2]} since {row[3]} UTC)" if row else "a session that "
           "has just let go")
    log.warning("replication slot '%s' (slot.name): waiting for its name's advisory lock, held by %s: another start "
                "or release of this name (a slot is made once the transactions open on the server have ended)",
                name, who)


def mark(conn, name: str, run: str) -> None:
    """Mark publication ``name`` as made, with its slot, for run ``run`` (a run key)."""
    conn.execute(sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(
        sql.Identifier(name), sql.Literal(_MARK.format(run=run))))


def marked_by(conn, run: str) -> list[str]:
    """The publications of this database marked as run ``run``'s: each slot.name the run made, the ones a
    resume has since renamed among them (review rev2, F6)."""
    return [row[0] for row in conn.execute("SELECT pubname FROM pg_publication WHERE obj_description(oid, "
                                           "'pg_publication') = %s ORDER BY pubname", (_MARK.format(run=run),))]


def owner(conn, name: str) -> Owner:
    """Whose slot ``name`` is. Slots are the server's, publications a database's: a slot made in another
    database is told by the publication there (review rev2, F7), read on a connection of its own."""
    there, database, comment = conn.execute(
        "SELECT s.slot_name IS NOT NULL, nullif(s.database, current_database()), "
        "(SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication WHERE pubname = %s) "
        "FROM (SELECT 1) AS one LEFT JOIN pg_replication_slots AS s ON s.slot_name = %s", (name, name)).fetchone()
    if database is not None:
        try:
            comment = _publication_comment(conn, database, name)
        except psycopg.Error as exc:
            return Owner(Held.ELSEWHERE, database=database, why=str(exc).strip())
    if not there and comment is None:
        return Owner(Held.FREE)
    if comment == "":
        return Owner(Held.UNMARKED)
    if comment == OLD_MARK:
        return Owner(Held.OLD)
    found = _MARKED_RUN.fullmatch(comment or "")
    return Owner(Held.RUN, found.group(1)) if found else Owner(Held.FOREIGN)


def _publication_comment(conn, database: str, name: str) -> str | None:
    """The comment of publication ``name`` in ``database`` ('' none; None: no such publication), asked as
    ``conn``'s user."""
    params = {**conn.info.get_parameters(), "dbname": database}
    if conn.pgconn.password:
        params["password"] = conn.pgconn.password.decode()
    with psycopg.connect(**params, connect_timeout=5, autocommit=True) as there:
        row = there.execute("SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication "
                            "WHERE pubname = %s", (name,)).fetchone()
    return row[0] if row else None


def fresh_start_refusal(conn, name: str, run: str) -> str | None:
    """Why run ``run``'s fresh start must not drop and recreate slot.name ``name``; None: it may."""
    found = owner(conn, name)
    if found.held is Held.FOREIGN:
        return _foreign(name)
    if found.held is Held.ELSEWHERE:
        return _elsewhere(name, found)
    if found.held in (Held.UNMARKED, Held.OLD):
        return _not_known(name, found.held, "does not start afresh on it")
    if found.held is Held.RUN and job_of(found.run) != job_of(run):
        return _another_job(name, found.run)
    return None


def claim(conn, name: str, run: str, lsn: int) -> bool:
    """At run ``run``'s resume from a checkpoint at ``lsn``: mark slot.name ``name`` as the run's when an
    earlier SeaTide marked it (``OLD``) and the checkpoint has read through it (the slot, in this database,
    confirmed no further than ``lsn``: a slot another job read since would have). Never one without any
    mark (``UNMARKED``): a hand-made publication of another consumer that lags passes that test too (review
    rev3), so it is left, with a warning saying how to settle it. Whether it did (True) or not."""
    with name_lock(conn, name):
        held = owner(conn, name).held
        if held is Held.UNMARKED and _slot_here(conn, name):
            log.warning("run %s: %s", run, _not_known(name, held, "reads it but never marks, drops or recreates it"))
        if held is not Held.OLD:
            return False
        read = conn.execute("SELECT confirmed_flush_lsn <= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s "
                            "AND database = current_database()", (format_lsn(lsn), name)).fetchone()
        if not (read and read[0]):
            return False
        mark(conn, name, run)
    log.info("run %s: replication slot '%s' (slot.name), whose mark named no run, is marked as this run's: its "
             "checkpoint has read through it", run, name)
    return True


def _slot_here(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (name,)).fetchone() is not None


def release_leaves(conn, name: str, run: str, keep: frozenset[str]) -> Leaving | None:
    """Why the release of run ``run`` leaves slot.name ``name``; None: drop it. Only what this run marked is
    dropped, even while another run names it (``keep``, the names other runs hold, changes nothing here since
    review rev3: another job is refused on it, and a later run of the job id makes it again at its fresh start); a mark naming another run of the same job id (a later
    one's fresh start re-marked it: it may be reading through it now) is left to that run's own release.
    ``NotReleased`` for one without any mark (``UNMARKED``): left, and said how to settle it. One an earlier
    SeaTide marked (``OLD``) is left too: had this run read through it since, its resume would have marked it
    as the run's (``claim``); else it may be another job's, and this run may never have used it (refused on it
    at its fresh start), so it is left with the reason and the way to settle it (told to the operator: no
    run's release will drop it; review finding 4), the release passing. So are another consumer's."""
    found = owner(conn, name)
    if found.held is Held.FOREIGN:
        return Leaving(_foreign(name), f"if nothing reads it any more: {_drop_sql(name)}")
    if found.held is Held.ELSEWHERE:
        return Leaving(_elsewhere(name, found), f"if nothing reads it any more, in database '{found.database}': "
                                                f"{_drop_sql(name)}")
    if found.held is Held.UNMARKED:
        if not _slot_here(conn, name):
            return Leaving(f"publication '{name}' (slot.name) carries no mark and has no slot: it retains nothing")
        raise NotReleased(_not_known(name, found.held, "neither drops it nor passes this release as done "
                                     "(it is tried again)", releasing=True))
    if found.held is Held.RUN and job_of(found.run) != job_of(run):
        return Leaving(_another_job(name, found.run))
    if found.held is Held.RUN and found.run != run:
        return Leaving(f"replication slot '{name}' (slot.name) was made again by {_shown(found.run)} of the same "
                       "job id, which may read through it now: its own release drops it")
    if found.held is Held.OLD:
        return Leaving(_not_known(name, found.held, "does not drop it at this release, which this run did not mark "
                                  "as its own (its resume does, once its checkpoint has read through it)",
                                  releasing=True),
                       f"if no job or consumer reads it any more (this job's own included): {_drop_sql(name)}; if "
                       "another SeaTide job given the same slot.name reads it, resume that job from its checkpoint "
                       "once: its resume marks the slot as its own, and its release drops it")
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


def _elsewhere(name: str, found: Owner) -> str:
    return (f"replication slot '{name}' (slot.name) was made in database '{found.database}', not this source's, "
            f"and its publication there could not be read ({found.why}): whose it is (a SeaTide job's or another "
            "consumer's) is not known, so SeaTide neither drops nor recreates it. Give this source a slot.name of "
            f"its own or, if nothing reads the slot any more, drop it yourself in database '{found.database}': "
            f"{_drop_sql(name)}")


def _not_known(name: str, held: Held, so: str, releasing: bool = False) -> str:
    """Why a slot whose mark names nobody is neither SeaTide's to drop nor free, and the ways to settle it
    (at a release, the job may not resume any more: its own is dropped by hand)."""
    whose = ("was not made by SeaTide as far as it can tell: its publication carries no mark, as a SeaTide before "
             "marks (08e5997) left its own, and as another consumer's (pg_recvlogical, a publication made by hand) is"
             if held is Held.UNMARKED else
             "was made by an earlier SeaTide, whose mark on its publication names no job: it may be another job's "
             "(a copy of this config) that still reads through it")
    if held is Held.UNMARKED:     # never claimed by a resume (review rev3): the user says it is SeaTide's
        resume = ("" if releasing else f"If it is this job's own from a SeaTide before marks, say so and resume the "
                  f"job from its checkpoint once (which marks it as the job's): COMMENT ON PUBLICATION \"{name}\" "
                  f"IS '{OLD_MARK}'; ")
    else:
        resume = ("" if releasing else "If it is this job's own, resume the job from its checkpoint once: a "
                  "checkpoint that has read through the slot marks it as the job's (then a fresh start may replace "
                  "it, and its release drops it); ")
    drop = f"{'If' if releasing else 'if'} no job or consumer reads it any more (this job's own included), drop it "
    other = (f"; if another consumer reads it, say so on its publication and SeaTide leaves it for good: COMMENT ON "
             f"PUBLICATION \"{name}\" IS 'not SeaTide''s'" if held is Held.UNMARKED else "")
    return (f"replication slot '{name}' (slot.name) {whose}. Dropping it would lose its reader's unread changes and "
            f"position, so SeaTide {so}. {resume}{drop}yourself: {_drop_sql(name)}{other}"
            f"{'' if releasing else '; or give this source a slot.name of its own'}")


__all__ = ["Held", "Leaving", "NotReleased", "OLD_MARK", "Owner", "claim", "fresh_start_refusal", "mark", "marked_by",
           "name_lock", "owner", "release_leaves"]
