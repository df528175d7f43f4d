"""What releases left on the sources' servers that no run of SeaTide will drop: one record each.

A release that leaves a slot.name whose owner it cannot tell (connectors/postgres_cdc/ownership.py)
writes a RELEASE_LEFT_HELD event and, in the same transaction, a ``left_held`` row. The event is of
the releasing run, and events are shown by the job id's current run and pruned by age: a dead run's
release (the id submitted again) or an expiry that forgets the job row left a slot retaining WAL that
nothing showed (review finding F2). The row is not tied to any run or job row: job-info shows every
row of the job id, the overview every row of the cluster, until the leader finds the slot gone or
owned by a run that will drop it (coordinator/left_held_watch.py) and removes the row.

Every text shown, the slot's name too, is masked with the secrets of the config that left it (stored with it:
the leader asks that config's source whether it is still held; a row adopted from an event has none, and is
masked with its run's, as the event is, while they are kept), and, those known or not, every
credential-named key's value (``secrets.mask_message``): an event of a job whose row and result
expiry removed has no config left to know its run's secrets by (review 6, F2).

A RELEASE_LEFT_HELD event with no row (review 2 F1: written before revision 0017, or by a leader of
the version before it during a rolling upgrade) is shown all the same, until a RELEASE_LEFT_SETTLED
or RELEASE_LEFT_DISMISSED event of its slot follows it, and the leader makes it a row (``adopt``). Such
an event does not say which config its source was loaded from: its row has none, and is never settled
by the leader's look, only dismissed by the operator once the slot is dropped (``dismiss``).
"""

from __future__ import annotations

import json

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Row
from sqlalchemy.engine import Connection

from seatide.secrets import mask_message, secret_values
from seatide.store import schema as s
from seatide.store.checkpoint_views import iso
from seatide.store.clock import store_now
from seatide.store.event_masking import run_secrets
from seatide.store.events import record_event

L = s.left_held.c
E = s.events.c
HELD, SETTLED, DISMISSED = "RELEASE_LEFT_HELD", "RELEASE_LEFT_SETTLED", "RELEASE_LEFT_DISMISSED"
# How the operator ends a record SeaTide cannot settle itself (store: ``dismiss``; CLI and REST).
DISMISS = "once it is dropped, dismiss it (seatide dismiss-left JOB_ID SLOT)"
# Why an adopted row cannot be asked: shown as its last measurement's failure.
UNASKABLE = ("told by an event of a SeaTide before revision 0017, which kept no config to ask its source with: "
             f"{DISMISS}")


def record_left_held(conn: Connection, result, job, plugin_id: str, connector: str, held, why: str,
                     settle: str) -> None:
    """Keep what run ``result`` (a job result, or a jobs row) left, in the caller's transaction, with the
    run's config and variables (``job``); a release told again replaces the run's row for the source and slot."""
    now = store_now(conn)
    mine = and_(L.job_id == result.job_id, L.run_id.is_not_distinct_from(result.run_id), L.plugin_id == plugin_id,
                L.holds == held.holds)
    conn.execute(delete(s.left_held).where(mine))
    conn.execute(insert(s.left_held).values(
        job_id=result.job_id, run_id=result.run_id, incarnation=result.incarnation, plugin_id=plugin_id,
        connector=connector, holds=held.holds, retained_bytes=held.retained_bytes, lost=bool(held.lost),
        state=held.state, why=why, settle=settle, config=job.config, variables=job.variables,
        left_at=now, measured_at=now))


def left_held_rows(conn: Connection, job_id: str | None = None) -> list:
    """The rows still held, of the job id (any run) or of the whole cluster, oldest first."""
    query = select(s.left_held)
    if job_id is not None:
        query = query.where(L.job_id == job_id)
    return conn.execute(query.order_by(L.id)).all()


def told_only(conn: Connection, job_id: str | None = None) -> list[Row]:
    """The RELEASE_LEFT_HELD events no row stands for and no later settling or dismissal follows, oldest first.
    Keyed by job, source and slot, not run: a slot is one on its server whichever run left it, and the run an
    event names is not always the one it is about (record_event gives a run without an id, a result from before
    revision 0011, the job's current one: review 3 F2 showed such a slot twice; review 4 R2-1, a settling or
    dismissal written under a later run left the event open, shown again and adopted again)."""
    query = select(s.events).where(E.kind.in_((HELD, SETTLED, DISMISSED)))
    if job_id is not None:
        query = query.where(E.job_id == job_id)
    open_: dict[tuple, Row] = {}
    for event in conn.execute(query.order_by(E.seq)).all():
        detail = json.loads(event.detail or "{}")
        key = (event.job_id, detail.get("source"), detail.get("holds"))
        if event.kind == HELD:
            if detail.get("holds") and detail.get("source"):     # every writer's names both: a row needs them
                open_[key] = event
        else:
            open_.pop(key, None)
    rows = {(r.job_id, r.plugin_id, r.holds) for r in left_held_rows(conn, job_id)}
    return [event for key, event in open_.items() if key not in rows]


def adopt(conn: Connection) -> int:
    """Make a row (with no config: ``UNASKABLE``) of each event ``told_only`` finds; how many. The leader's."""
    events = told_only(conn)
    for event in events:
        # its texts masked as they were shown (review 4, F1): the row keeps no config to mask them with later
        told = _told(event, _event_secrets(conn, event))
        conn.execute(insert(s.left_held).values(
            job_id=event.job_id, run_id=event.run_id, incarnation=event.incarnation, plugin_id=told["source"],
            connector=told["connector"], holds=json.loads(event.detail)["holds"],     # as named: dismissed by it
            retained_bytes=told["retainedBytes"], lost=told["lost"], state=told["state"], why=told["why"],
            settle=told["settle"], left_at=event.at, measured_at=event.at, error=UNASKABLE))
    return len(events)


def dismiss(conn: Connection, job_id: str, holds: str, actor: str) -> int:
    """The operator's word that slot ``holds``, which job id ``job_id``'s releases left, is settled (dropped by
    hand, or its server gone for good): its rows go, each with a RELEASE_LEFT_DISMISSED event; how many went."""
    mine = and_(L.job_id == job_id, L.holds == holds)
    keys = {(row.run_id, row.plugin_id, row.incarnation) for row in conn.execute(select(s.left_held).where(mine))}
    keys |= {(e.run_id, json.loads(e.detail).get("source"), e.incarnation) for e in told_only(conn, job_id)
             if json.loads(e.detail).get("holds") == holds}
    conn.execute(delete(s.left_held).where(mine))
    for run_id, plugin_id, incarnation in sorted(keys, key=str):
        record_event(conn, DISMISSED, actor, job_id, incarnation, None, run_id=run_id, source=plugin_id, holds=holds)
    return len(keys)


def left_behind(conn: Connection, job_id: str | None = None) -> list[dict]:
    """What job-info (``leftBehind``), the overview and the UI show, masked: which slot, on whose run's
    release, the WAL it keeps as last measured, why it was left, and how to settle it."""
    shown = [_told(event, _event_secrets(conn, event)) for event in told_only(conn, job_id)]
    for row in left_held_rows(conn, job_id):
        # one adopted from an event keeps no config: masked as its event is, with its run's secrets while known
        secrets = (secret_values(row.config, json.loads(row.variables or "{}")) if row.config is not None
                   else run_secrets(conn, row.job_id, [row.incarnation])[row.incarnation])
        shown.append({
            "jobId": row.job_id, "run": row.run_id, "source": row.plugin_id, "connector": row.connector,
            "holds": mask_message(row.holds, secrets), "retainedBytes": row.retained_bytes, "lost": bool(row.lost),
            "state": row.state, "why": mask_message(row.why, secrets), "settle": mask_message(row.settle, secrets),
            "time": iso(row.left_at), "measuredTime": iso(row.measured_at),
            "error": mask_message(row.error, secrets)})
    return shown


def _event_secrets(conn: Connection, event: Row) -> frozenset:
    return run_secrets(conn, event.job_id, [event.incarnation])[event.incarnation]


def _told(event: Row, secrets: frozenset) -> dict:
    """An event ``told_only`` finds, shown as a row is: its texts and its slot's name masked (a slot named after
    a secret variable: review after eed0614); the source as named, which with the slot as stored matches it to
    its row and which the operator's dismissal names (review 4, R2-3/R2-4)."""
    detail = json.loads(event.detail or "{}")
    detail.update({key: mask_message(detail.get(key) or "", secrets) for key in ("why", "settle")})
    return {"jobId": event.job_id, "run": event.run_id, "source": detail.get("source"),
            "connector": detail.get("connector") or "-", "holds": mask_message(detail.get("holds"), secrets),
            "retainedBytes": detail.get("retainedBytes"), "lost": bool(detail.get("lost")),
            "state": detail.get("state"), "why": detail.get("why") or "", "settle": detail.get("settle") or "",
            "time": iso(event.at), "measuredTime": iso(event.at), "error": UNASKABLE}


def remeasured(conn: Connection, row_id: int, held=None, error: str | None = None) -> None:
    """A new measurement of a row (``held``: the HeldPosition found), or why it failed (the figures kept)."""
    values = {"error": error} if held is None else {
        "retained_bytes": held.retained_bytes, "lost": bool(held.lost), "state": held.state,
        "measured_at": store_now(conn), "error": None}
    conn.execute(update(s.left_held).where(L.id == row_id).values(**values))


def settled(conn: Connection, row_id: int) -> None:
    conn.execute(delete(s.left_held).where(L.id == row_id))


__all__ = ["adopt", "dismiss", "left_behind", "left_held_rows", "record_left_held", "remeasured", "settled",
           "told_only"]
