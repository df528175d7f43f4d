"""The replication slot and publication a Postgres-CDC source reads through.

Naming rule: ``seatide_<job id>_<pipeline id>_<plugin id>`` (lower case, every character
outside a-z, 0-9 and _ becomes _, e.g. ``seatide_1764130000123_1_source0``), unless
``slot.name`` names the slot. The publication has the slot's name. Names longer than
PostgreSQL's 63 characters keep their first 54 and end with a hash of the whole. The publication
is marked with the run it was made for: a slot.name another job or consumer holds is never
dropped or recreated (ownership.py).

Changes are streamed over a replication connection from each batch's own start
(``replication``), which never confirms anything; the slot moves (``pg_replication_slot_advance``)
only when Spark says the batch holding those changes is committed, so a restarted query can
always read them again. A slot serves one connection at a time: the steps here wait while a
stream that just ended still holds it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from dataclasses import dataclass

from psycopg import errors, sql

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.postgres_cdc import holder, ownership
from seatide.connectors.postgres_cdc.pgoutput import format_lsn, parse_lsn
from seatide.plugin.base import HeldPosition, LeftBehind, permanent_in_worker

log = logging.getLogger(__name__)

PREFIX = "seatide_"
_MAX_NAME = 63
_CUT = 54                   # a longer name keeps this much, then _ and a hash of the whole
_HASHED_RANGE = 64


def _clean(text: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


def job_prefix(job_id: str) -> str:
    return f"{PREFIX}{_clean(job_id or 'local')}_"


def default_name(job_id: str, pipeline_id: int, plugin_id: str) -> str:
    name = f"{job_prefix(job_id)}{pipeline_id}_{_clean(plugin_id).replace('_', '').strip('_')}"
    name = re.sub(r"_+$", "", name)
    if len(name) > _MAX_NAME:
        name = name[:_CUT] + "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


@dataclass(frozen=True)
class SlotState:
    confirmed_lsn: int | None
    wal_status: str | None


class LostPosition(Exception):
    """The slot cannot return the changes after a checkpoint's position any more."""


def start_afresh(conn, name: str, tables: list, run: str, make_slot, waiting: holder.Wait | None = None,
                 given: bool = False):
    """Drop whatever this name had, create the publication marked as run ``run``'s (ownership.py) in one
    transaction, and make the slot (``make_slot()``, on a replication connection: its answer is returned),
    all under the name's lock: another start or a release in between would find the name free, or drop
    what this one just made. ``waiting``: the driver's wait for a slot of that name someone holds;
    ``given``: the name is slot.name's, and what it has may be another consumer's or another job's:
    refused for good then, never dropped (asked once before the lock too, not to queue behind it)."""
    _refuse(conn, name, run, given)
    with ownership.name_lock(conn, name):
        _refuse(conn, name, run, given)         # again: another start may have made it since
        drop(conn, name, waiting=waiting)
        with conn.transaction():        # a publication is never left without its mark (review rev2, F4)
            conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                sql.Identifier(name), sql.SQL(", ").join(t.ident() for t in tables)))
            ownership.mark(conn, name, run)
        return make_slot()


def _refuse(conn, name: str, run: str, given: bool) -> None:
    why = ownership.fresh_start_refusal(conn, name, run) if given else None
    if why is not None:
        raise permanent_in_worker(f"Postgres-CDC cannot start this job afresh: {why}")


def release_run(conn, run: str, given: str | None, keep: frozenset[str], deadline: float) -> list[LeftBehind]:
    """Drop run ``run``'s slots and publications by ``deadline`` (monotonic): those of the default names
    (of its pipelines and sources: only SeaTide makes them, for this run alone), also when the source
    names a slot.name now, and every slot.name marked as this run's (a resume that gave the source a
    slot.name, or another one, left the slot it read through before: review rev2, F6); ``given``, the
    slot.name, unless ownership says to leave it (``release_given``). What it left that no run will drop."""
    named = [given] if given else []
    marked = [n for n in ownership.marked_by(conn, run) if n not in named]
    left = []
    for name in named + marked + [n for n in names_of_job(conn, run) if n not in named + marked]:
        wait_s = max(0.05, deadline - time.monotonic())
        if name in named + marked:
            left += filter(None, [release_given(conn, name, run, keep, wait_s)])
        else:
            drop(conn, name, wait_s=wait_s, job_id=run)
    return left


def release_given(conn, name: str, run: str, keep: frozenset[str], wait_s: float) -> LeftBehind | None:
    """Drop slot.name ``name`` at run ``run``'s release unless ownership says to leave it (said in the log),
    the mark read and the drop made under the name's lock. Left while no run will drop it, with a slot that
    holds WAL: what it holds, why, and how to settle it (the leader's warning event)."""
    with ownership.name_lock(conn, name):
        leaving = ownership.release_leaves(conn, name, run, keep)
        if leaving is None:
            drop(conn, name, wait_s=wait_s, job_id=run)
            return None
        found = retained(conn, name) if leaving.settle is not None else None
    log.warning("job %s: its release leaves %s", run, leaving.why)
    if found is None:
        return None
    size, wal_status = found
    return LeftBehind(HeldPosition(name, size, lost=wal_status == "lost", state=wal_status), leaving.why,
                      leaving.settle)


def set_publication_tables(conn, name: str, tables: list) -> None:
    """Make the publication list exactly ``tables`` (tables added to or removed from table-names
    of a resumed job). Changes are published as of where this commits in the WAL: a table added
    here is snapshotted at a point after it (``stream``), and one removed is no longer decoded."""
    conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(
        sql.Identifier(name), sql.SQL(", ").join(t.ident() for t in tables)))


def temporary_name(name: str) -> str:
    """A name for a short-lived slot beside ``name`` (unique: a stopped driver's may linger)."""
    return f"{PREFIX}tmp_{hashlib.sha1(name.encode()).hexdigest()[:12]}_{secrets.token_hex(4)}"


def drop(conn, name: str, wait_s: float = 10.0, job_id: str | None = None, waiting: holder.Wait | None = None) -> None:
    """Drop the slot and the publication called ``name`` if they exist (idempotent).

    A slot is busy while a stream or peek reads it; wait for that to end rather than fail: up to
    ``wait_s`` (``ObjectInUse`` naming the holder then; ``job_id``'s sessions are its own), or
    as the driver's ``waiting`` says.
    """
    bounded = holder.Wait(name, holder.application_name({"job_id": job_id}) if job_id else None, wait_s,
                          "the release's bound")
    _when_free(lambda: conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                                    "WHERE slot_name = %s", (name,)), conn, waiting or bounded,
               fails_job=waiting is not None)
    conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(name)))


def _when_free(step, conn, waiting: holder.Wait, fails_job: bool = False):
    """Run ``step``, again while another connection holds the slot (``waiting`` logs it). Past the
    bound: ``ObjectInUse`` naming the holder, which a release retries; for a driver's step
    (``fails_job``), a holder that is not the job's own fails the job instead (holder.py)."""
    pause = 0.05
    while True:
        try:
            return step()
        except errors.ObjectInUse as exc:
            ended = waiting.held(holder.find_sql(conn, waiting.slot_name))
            if ended is not None:
                text, lasting = ended
                if lasting and fails_job:
                    raise permanent_in_worker(text) from None
                raise errors.ObjectInUse(text) from exc
            time.sleep(min(pause, waiting.left()))     # past the bound by a pause at most
            pause = min(0.5, pause * 2)


def names_of_job(conn, job_id: str) -> list[str]:
    """Slots and publications named by the default rule for ``job_id``: exactly, as a prefix
    would also take those of a job whose id extends this one's (``orders`` and ``orders-1``)."""
    pattern = job_prefix(job_id)[:_CUT].replace("_", r"\_") + "%"
    rows = conn.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s "
                        "UNION SELECT pubname FROM pg_publication WHERE pubname LIKE %s",
                        (pattern, pattern)).fetchall()
    return sorted(row[0] for row in rows if is_of_job(row[0], job_id))


def is_of_job(name: str, job_id: str) -> bool:
    """Whether ``default_name`` gives ``name`` for some pipeline and source of ``job_id``. Plugin ids
    are ``source[n]``; a name cut to fit (ending in a hash of the whole) is matched against the
    names of the first ``_HASHED_RANGE`` pipelines and sources: one beyond is left, never another's taken."""
    if re.fullmatch(re.escape(job_prefix(job_id)) + r"[0-9]+_source[0-9]+", name):
        return True
    if len(name) != _MAX_NAME or not name.startswith(job_prefix(job_id)[:_CUT]):
        return False
    return any(default_name(job_id, p, f"source[{n}]") == name
               for p in range(_HASHED_RANGE) for n in range(_HASHED_RANGE))


def state(conn, name: str) -> SlotState | None:
    row = conn.execute("SELECT confirmed_flush_lsn::text, wal_status FROM pg_replication_slots "
                       "WHERE slot_name = %s", (name,)).fetchone()
    if row is None:
        return None
    return SlotState(parse_lsn(row[0]) if row[0] else None, row[1])


def retained(conn, name: str) -> tuple[int | None, str | None] | None:
    """(bytes of WAL the server keeps for slot ``name``, its wal_status); None: no such slot.

    A slot keeps the WAL from its ``restart_lsn`` on (what decoding may still need), which is at
    or before its ``confirmed_flush_lsn``: the retained size is measured from there."""
    row = conn.execute("SELECT (pg_current_wal_lsn() - restart_lsn)::bigint, wal_status FROM pg_replication_slots "
                       "WHERE slot_name = %s", (name,)).fetchone()
    if row is None:
        return None
    return (max(0, int(row[0])) if row[0] is not None else None), row[1]


def still_left(conn, name: str) -> HeldPosition | None:
    """The WAL slot.name ``name``, which a release left, keeps now; None once it is dropped, or marked as a
    run's (a resume of the job that reads it claimed it: that run's release drops it)."""
    if ownership.owner(conn, name).held is ownership.Held.RUN:
        return None
    return measured(conn, name)


def measured(conn, name: str) -> HeldPosition | None:
    """What slot ``name`` keeps now (``retained``) as a HeldPosition; None: no such slot."""
    found = retained(conn, name)
    if found is None:
        return None
    size, wal_status = found
    return HeldPosition(name, size, lost=wal_status == "lost", state=wal_status)


def gone(conn, name: str, found: SlotState | None = None) -> str | None:
    """Why slot ``name`` can return no change at all any more (it was dropped, the server removed
    its WAL), whatever position it is read from; None while it exists and has its WAL."""
    found = found if found is not None else state(conn, name)
    if found is None:
        return f"replication slot '{name}' no longer exists"
    if found.wal_status == "lost":
        return (f"the server removed the WAL that replication slot '{name}' needs "
                "(wal_status = lost; see max_slot_wal_keep_size)")
    return None


def lost_position_message(name: str, lsn: int, why: str) -> str:
    """The error a resume from ``lsn`` of slot ``name`` fails with, in the driver's read or before it."""
    return (f"Postgres-CDC cannot resume: the checkpoint's position is LSN {format_lsn(lsn)} of replication "
            f"slot '{name}', but {why}. The changes after that position cannot be read again, and skipping "
            f"them would lose data: {START_OVER}.")


def check_position(conn, name: str, lsn: int) -> None:
    """Raise LostPosition unless the slot can still return every change after ``lsn``."""
    found = state(conn, name)
    why = gone(conn, name, found) if found is not None else f"replication slot '{name}' no longer exists"
    if why is not None:
        raise LostPosition(why)
    if found.confirmed_lsn is not None and found.confirmed_lsn > lsn:
        raise LostPosition(moved_on(name, found.confirmed_lsn))


def moved_on(name: str, confirmed_lsn: int) -> str:
    """Why a slot confirmed past the job's position: the job advances it only to a position it
    committed, so someone else read it (confirming), advanced it, or dropped and created it again."""
    return (f"replication slot '{name}' has already moved on to LSN {format_lsn(confirmed_lsn)}, past it: something "
            "other than this job moved the slot, most likely another consumer reading it (pg_recvlogical, "
            "Debezium) or another job given the same slot.name (which may have dropped and created it again), "
            "so the changes in between are no longer in the slot. Stop that consumer, or give this source a "
            "slot.name of its own")


def peek(conn, name: str, *, upto_lsn: int | None = None, upto_changes: int | None = None) -> list[bytes]:
    """pgoutput messages from the slot's confirmed position on, without moving the slot (for
    looking at a slot; the stream reads with ``replication``)."""
    waiting = holder.Wait(name, None, 60.0, "a peek's bound")
    rows = _when_free(lambda: conn.execute(
        "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s, "
        "'proto_version', '1', 'publication_names', %s)",
        (name, format_lsn(upto_lsn) if upto_lsn is not None else None, upto_changes,
         sql.Identifier(name).as_string(conn))).fetchall(), conn, waiting)
    return [row[0] for row in rows]


def flushed_lsn(conn) -> int:
    return parse_lsn(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])


def advance(conn, name: str, lsn: int, waiting: holder.Wait | None = None) -> None:
    """Confirm everything up to ``lsn``: the server may now recycle the WAL before it.
    ``waiting``: the driver's wait while another connection holds the slot."""
    found = state(conn, name)
    if found is not None and (found.confirmed_lsn is None or found.confirmed_lsn < lsn):
        _when_free(lambda: conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                                        (name, format_lsn(lsn))), conn,
                   waiting or holder.Wait(name, None, 60.0), fails_job=waiting is not None)
