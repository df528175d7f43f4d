"""A lock in the target database that two writers of one sink share, for a step that must be
made once however many drivers of the sink run (a replaced one, a zombie, may still run).

PostgreSQL's advisory lock and MySQL/MariaDB's ``GET_LOCK``: both belong to the session, so a
writer that dies (its connection closes) lets go at once, and both outlive a transaction's end,
so DDL that commits by itself (MySQL) stays inside the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Iterator

from seatide.connectors.jdbc.url import POSTGRESQL

# PostgreSQL's advisory key space is shared with every other user of the database: SeaTide's
# keys all carry this first half (the liveness locks' class, store/liveness.py, is 0x5EA7).
ADVISORY_CLASS = 0x5EA8
TRY_EVERY_S = 0.1


class LockNotTaken(TimeoutError):
    """Another writer of the sink held the lock for longer than the wait."""


@contextlib.contextmanager
def named_lock(cursor, dialect: str, name: str, wait_s: float) -> Iterator[None]:
    digest = hashlib.sha1(name.encode()).hexdigest()
    if dialect == POSTGRESQL:
        key = (ADVISORY_CLASS, int(digest[:8], 16) & 0x7FFFFFFF)
        deadline = time.monotonic() + wait_s
        while True:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", key)
            if cursor.fetchone()[0]:
                break
            if time.monotonic() >= deadline:
                raise LockNotTaken(f"lock {name!r} held by another writer for over {wait_s:.0f} s")
            time.sleep(TRY_EVERY_S)
        release, args = "SELECT pg_advisory_unlock(%s, %s)", key
    else:
        lock = f"seatide:{digest[:40]}"          # MySQL names are at most 64 characters
        cursor.execute("SELECT GET_LOCK(%s, %s)", (lock, max(1, int(wait_s))))
        if cursor.fetchone()[0] != 1:
            raise LockNotTaken(f"lock {name!r} held by another writer for over {wait_s:.0f} s")
        release, args = "SELECT RELEASE_LOCK(%s)", (lock,)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):     # a broken connection has let go already
            cursor.execute(release, args)
            cursor.fetchall()
