"""The leader's snapshot read sees one moment of the store: a job ended by another process
between two of its statements is seen as it was at the first, on both stores."""

from __future__ import annotations

from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.jobs import CONSOLE_JOB


def _status(conn, job_id):
    return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == job_id)).scalar()


def test_a_snapshot_does_not_see_a_write_committed_while_it_reads(store_url, tmp_path):
    store = open_store(store_url)
    try:
        intents.submit(store, str(tmp_path), text=CONSOLE_JOB, job_id="j1", actor="test")
        with store.snapshot() as conn:
            before = _status(conn, "j1")
            with store.write() as other:       # another process, committing in between
                other.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FINISHED"))
            assert _status(conn, "j1") == before == "CREATED"
        with store.read() as conn:
            assert _status(conn, "j1") == "FINISHED"
    finally:
        store.dispose()
