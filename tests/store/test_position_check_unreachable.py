"""A resume whose CDC source's server cannot be reached (outside review 9, F4).

Unreachable is not gone: the resume's early position check (coordinator/position_check.positions_gone)
cannot tell, so the resume is recorded and its driver's read checks where it runs (the coordinator may
not be on the database's network). But the answer must say so: which pipeline, which source, which
address could not be reached, that nothing is known to be gone, and that the job fails if its driver
cannot reach it either, to be resumed again once it can: never a suggestion to start fresh. A refusal
for another pipeline's gone position names the unreached one too, since ``--fallback fresh`` resumes it.

Real servers: a closed port on this host (refused at once), and the test PostgreSQL, where the job's
slot was never made (gone)."""

from __future__ import annotations

import socket

import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from tests.databases.jobs import PG_URL
from tests.store.test_position_check_deadline import _checkpointed_at_lsn
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only      # the store is not the subject: the servers are


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def _pipeline(url: str, n: int) -> str:
    return f"""source {{ Postgres-CDC {{ plugin_output = "s{n}", base-url = "{url}"
  username = "postgres", password = "", database-names = ["test"], schema-names = ["public"], table-names = ["test.public.r5_orders"] }} }}
sink {{ Console {{ plugin_input = "s{n}" }} }}
"""


def _stopped(store, tmp_path, *urls: str) -> None:
    submit(store, tmp_path, text='env { job.mode = "STREAMING" }\n' + "".join(
        _pipeline(url, n) for n, url in enumerate(urls)))
    with store.read() as conn:
        directories = conn.execute(select(s.pipelines.c.checkpoint_dir).where(s.pipelines.c.job_id == "j1")).scalars()
        for directory in directories:
            _checkpointed_at_lsn(directory)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=0))
    _end(store, "j1", "CANCELED", "CLEAN")


def test_a_resume_whose_source_cannot_be_reached_is_recorded_and_says_so(store, tmp_path):
    port = _closed_port()
    _stopped(store, tmp_path, f"jdbc:postgresql://127.0.0.1:{port}/test")
    accepted = intents.resume(store, "j1", actor="cli")
    said = "\n".join(accepted.warnings)
    assert (f"pipeline 1: its source Postgres-CDC (source[0]) at 127.0.0.1:{port} could not be "
            "reached to check its checkpoint's position") in said, said
    assert "not known to be gone" in said and "resume it again once the server can be reached" in said, said
    assert "fresh" not in said, said
    with store.read() as conn:
        assert conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "j1")).scalar() == "CREATED"


def test_a_refusal_for_a_gone_position_names_the_source_that_could_not_be_reached(store, tmp_path):
    port = _closed_port()
    _stopped(store, tmp_path, PG_URL, f"jdbc:postgresql://127.0.0.1:{port}/test")
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", actor="cli")
    message = str(refused.value)
    assert "pipeline 1: Postgres-CDC cannot resume" in message and "no longer exists" in message, message
    assert (f"pipeline 2: its source Postgres-CDC (source[1]) at 127.0.0.1:{port} could not be reached to check its "
            "checkpoint's position") in message, message


def test_a_release_that_cannot_reach_the_server_is_named_in_a_resumes_refusal(store, tmp_path):
    """Cancel and release of a job whose server is down: the leader retries the drop with backoff until it can
    (coordinator/release.py), and a resume, fresh or not, waits for it. It was told "being released right now;
    once that is done (seconds)", again and again while the server stayed down."""
    from seatide.coordinator.release import Releaser, due_releases
    from seatide.store.jobs import request_stop
    from tests.leader import elected

    port = _closed_port()
    _stopped(store, tmp_path, f"jdbc:postgresql://127.0.0.1:{port}/test")
    request_stop(store, "j1", release=True)
    releaser, epoch = Releaser(store, "coordinator:c1"), elected(store, "c1").epoch
    for now in (0.0, 100.0):            # two tries, the second past the first's backoff
        [due] = due_releases(store)
        releaser.step(epoch, due, now)
    for fallback in (None, "fresh"):
        with pytest.raises(intents.Refusal) as refused:
            intents.resume(store, "j1", fallback=fallback, actor="cli")
        message = str(refused.value)
        assert "seconds" not in message, message
        assert "its release has failed 2 times, the last at" in message, message
        assert f'connection to server at "127.0.0.1", port {port} failed: Connection refused' in message, message
        assert ("the leader tries again until the server can be reached; resume it with --fallback fresh once "
                "the release is done (`seatide status j1`)") in message, message
