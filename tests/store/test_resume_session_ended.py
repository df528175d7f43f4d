"""A resume whose store session the server ends while it reads (its idle limit on a loaded machine, a
restart, a terminated backend) reads again on a new session and is recorded; before, the resume failed
with the store's error (a CPU-hogged full run: IdleInTransactionSessionTimeout in test_reused_ids)."""

from __future__ import annotations

from sqlalchemy import select, text

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import restore
from seatide.store import schema as s
from tests.store.test_reused_ids import _checkpoint, _end
from tests.store.test_store import JOB, store, submit  # noqa: F401  (store is a fixture)
from tests.stores import postgresql_only


@postgresql_only          # a file has no server to end its sessions
def test_a_resume_whose_read_session_is_ended_reads_again_and_is_recorded(store, tmp_path, monkeypatch):
    submit(store, tmp_path)      # test_reused_ids' shape: an old run checkpointed, a new one ended before its first
    _checkpoint(store)
    _end(store)
    submit(store, tmp_path)
    _end(store, "FAILED")
    reads, ended = restore.decided_in_place, []

    def ending_once(conn, *args, **kwargs):
        if not ended:            # the server ends this session mid-read, as its idle limit does
            ended.append(conn.execute(text("SELECT pg_backend_pid()")).scalar())
            conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        return reads(conn, *args, **kwargs)

    monkeypatch.setattr(restore, "decided_in_place", ending_once)
    restore.resume_job(store, "j1", plan=build_plan(load_job_text(JOB)), text=JOB, variables={})
    assert ended, "the session was never ended: the test did not reach the read"
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "j1")).scalar() == "CREATED"
