"""The event log: one append, in the caller's transaction.

Apart from ``db.py`` because a migration records its upgrade here, and ``db.py`` opens a
store by migrating it: with this in ``db.py`` the two modules imported each other.
"""

from __future__ import annotations

import json

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from seatide.store import schema as s
from seatide.store.clock import store_now


def record_event(conn: Connection, kind: str, actor: str, job_id: str | None = None,
                 incarnation: int | None = None, epoch: int | None = None, **detail) -> None:
    """Append to the event log, in the caller's transaction (so the log never lies), at the
    store's time (events are listed and pruned by it)."""
    conn.execute(insert(s.events).values(
        at=store_now(conn), job_id=job_id, incarnation=incarnation, kind=kind,
        detail=json.dumps(detail, default=str), epoch=epoch, actor=actor))
