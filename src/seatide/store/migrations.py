"""Versioned schema migrations, applied in order, once, by whichever process opens the store first.

Each migration is a function of a connection, run in one transaction together with
the version row that records it; concurrent openers serialize on a lock (SQLite's
write lock, a PostgreSQL advisory lock), so a migration never runs twice.
"""

from __future__ import annotations

import time
from typing import Callable

from sqlalchemy import insert, inspect, select, text
from sqlalchemy.engine import Connection

from seatide.store import schema as s

_ADVISORY_KEY = 0x5EA71DE


def _v1_initial(conn: Connection) -> None:
    s.metadata.create_all(conn)
    conn.execute(insert(s.leader_lease).values(id=1, node_id=None, epoch=0, expires_at=0.0))


def _v2_tick_indexes(conn: Connection) -> None:
    # A store made by version 1 lacks them; a new one already has them from create_all.
    for index in (s.jobs_status_index, s.attempts_state_index):
        index.create(conn, checkfirst=True)


def _v3_progress_watchdog(conn: Connection) -> None:
    # The progress watchdog's columns; a new store already has them from create_all.
    present = {(t, c["name"]) for t in ("jobs", "attempts") for c in inspect(conn).get_columns(t)}
    for table, name in (("jobs", "progress_timeout_s"), ("jobs", "on_hung"), ("jobs", "hung_since"),
                        ("attempts", "progress_at"), ("attempts", "tasks_done")):
        if (table, name) not in present:
            column = s.metadata.tables[table].c[name]
            default = f" DEFAULT '{column.server_default.arg}'" if column.server_default is not None else ""
            not_null = " NOT NULL" if not column.nullable else ""
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} "
                              f"{column.type.compile(dialect=conn.dialect)}{not_null}{default}"))


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "initial schema", _v1_initial),
    (2, "indexes for the reconcile tick: jobs by status, attempts by state", _v2_tick_indexes),
    (3, "progress watchdog: jobs.progress_timeout_s, on_hung, hung_since; attempts.progress_at, tasks_done",
     _v3_progress_watchdog),
]

LATEST = MIGRATIONS[-1][0]


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(select(s.schema_version.c.version).order_by(s.schema_version.c.version.desc())
                        ).scalar() or 0


def migrate(store) -> int:
    with store.write() as conn:
        if not store.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_KEY})
        version = current_version(conn)
        if version > LATEST:
            raise RuntimeError(f"the store has schema version {version}, newer than this SeaTide "
                               f"({LATEST}); upgrade SeaTide")
        for number, _name, apply in MIGRATIONS:
            if number > version:
                apply(conn)
                if number == 1:
                    s.schema_version.create(conn, checkfirst=True)
                conn.execute(insert(s.schema_version).values(version=number, applied_at=time.time()))
                version = number
    return version
