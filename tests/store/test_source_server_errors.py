"""A source server's error is named as what it is (outside review of 7d56489..26756a7, F5 and F6).

The release recorded every failure of its drop as a retry and told a resume "the leader tries again until the
server can be reached", and the resume's position check said "could not be reached" of any error: a
role without the REPLICATION privilege, a role the server does not know, are no outage. Trying again never
clears them, and the user needs the fix, not a wait. Real servers: the test PostgreSQL, with a role of
its own (no REPLICATION) and a physical slot under the job's slot name (wal_level replica has no logical ones)."""

from __future__ import annotations

import json

import psycopg
import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.coordinator.release import Releaser, due_releases
from seatide.store import schema as s
from seatide.store.jobs import request_stop
from tests.databases.jobs import PG_URL
from tests.leader import elected
from tests.store.test_position_check_deadline import _checkpointed_at_lsn
from tests.store.test_position_check_unreachable import _closed_port
from seatide.connectors.postgres_cdc import ownership
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only      # the store is not the subject: the servers are

ROLE, SLOT = "seatide_no_replication", "seatide_review_f5_slot"


@pytest.fixture
def slot_held():
    """A slot the job names, and a role that may log in but not use replication slots."""
    with psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOREPLICATION")
        if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (SLOT,)).fetchone() is None:
            conn.execute("SELECT pg_create_physical_replication_slot(%s)", (SLOT,))
        if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (SLOT,)).fetchone() is None:
            conn.execute(f"CREATE PUBLICATION {SLOT}")         # as SeaTide makes it: its release may drop it
            ownership.mark(conn, SLOT, "j1")
        yield
        conn.execute(f"DROP PUBLICATION IF EXISTS {SLOT}")
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                     (SLOT,))


def _job_text(user: str, url: str = PG_URL) -> str:
    return f"""env {{ job.mode = "STREAMING" }}
source {{ Postgres-CDC {{ plugin_output = "s0", base-url = "{url}", slot.name = "{SLOT}"
  username = "{user}", password = "", database-names = ["test"], schema-names = ["public"], table-names = ["test.public.r5_orders"] }} }}
sink {{ Console {{ plugin_input = "s0" }} }}
"""


def _released_twice(store, tmp_path, text: str, leaders: int = 1) -> None:
    _stopped_as(store, tmp_path, text)
    _marked_as_the_runs(store)
    request_stop(store, "j1", release=True)
    epoch = elected(store, "c1").epoch
    releaser = Releaser(store, "coordinator:c1")
    for now in (0.0, 100.0):            # two tries, the second past the first's backoff
        [due] = due_releases(store)
        releaser.step(epoch, due, now)
        if leaders > 1:
            releaser = Releaser(store, "coordinator:c1")    # as a new leader's: no memory of the tries before it


def _retries(store) -> list[dict]:
    with store.read() as conn:
        return [json.loads(e.detail) for e in conn.execute(select(s.events).where(
            s.events.c.job_id == "j1", s.events.c.kind == "RELEASE_RETRY").order_by(s.events.c.seq))]


def test_a_release_refused_a_privilege_names_it_and_its_fix_not_a_wait_for_the_server(store, tmp_path, slot_held):
    _released_twice(store, tmp_path, _job_text(ROLE))
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", fallback="fresh", actor="cli")
    message = str(refused.value)
    assert "InsufficientPrivilege: must be superuser or replication role to use replication slots" in message, message
    assert "until the server can be reached" not in message, message
    assert "trying again does not fix it" in message and "REPLICATION" in message, message
    assert [r["lasting"] for r in _retries(store)] == [True, True]


def test_a_release_that_cannot_reach_the_server_still_waits_for_it(store, tmp_path):
    _released_twice(store, tmp_path, _job_text("postgres", f"jdbc:postgresql://127.0.0.1:{_closed_port()}/test"))
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", fallback="fresh", actor="cli")
    message = str(refused.value)
    assert "the leader tries again until the server can be reached" in message, message
    assert "trying again does not fix it" not in message, message
    assert [r["lasting"] for r in _retries(store)] == [False, False]


def test_a_new_leader_counts_on_from_the_release_tries_before_it(store, tmp_path):
    _released_twice(store, tmp_path, _job_text("postgres", f"jdbc:postgresql://127.0.0.1:{_closed_port()}/test"),
                    leaders=2)
    assert [r["tries"] for r in _retries(store)] == [1, 2]


def test_a_position_check_refused_by_the_server_names_that_error_not_an_unreachable_server(store, tmp_path):
    _stopped_as(store, tmp_path, _job_text("seatide_no_such_role"))
    accepted = intents.resume(store, "j1", actor="cli")
    said = "\n".join(accepted.warnings)
    assert 'role "seatide_no_such_role" does not exist' in said, said
    assert "could not be reached" not in said and "once the server can be reached" not in said, said
    assert "the server answered the position check with an error" in said, said


def _marked_as_the_runs(store) -> None:
    """The slot_held publication marked as the submitted run's, as its driver marks it (a release drops only
    what its own run marked)."""
    from seatide.store.runs import run_key

    with store.read() as conn:
        run_id = conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == "j1")).scalar()
    with psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (SLOT,)).fetchone() is not None:
            ownership.mark(conn, SLOT, run_key("j1", run_id))


def _stopped_as(store, tmp_path, text: str) -> None:
    """Stopped with a checkpoint at an LSN of its source (``text``: the job)."""
    submit(store, tmp_path, text=text)
    with store.read() as conn:
        for directory in conn.execute(select(s.pipelines.c.checkpoint_dir).where(s.pipelines.c.job_id == "j1")).scalars():
            _checkpointed_at_lsn(directory)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=0))
    _end(store, "j1", "CANCELED", "CLEAN")
