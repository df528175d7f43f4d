"""Outside review of b5aba34..HEAD, R2: a source server that cannot be reached because it never answers (a
firewall that drops, a host that hangs: here a real TCP listener that accepts and says nothing) makes libpq's
connect time out. psycopg raises ``psycopg.errors.ConnectionTimeout``, not a bare ``OperationalError``, and
``plugin/server_errors.unreachable`` matches the class name ``OperationalError`` only: the outage is called
lasting, "no outage ... one SeaTide's own: report it", and the position check says the server *answered*."""

from __future__ import annotations

import socket

import pytest

from seatide import intents
from tests.store.test_source_server_errors import _job_text, _released_twice, _retries, _stopped_as
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

# The store is not the subject, nor is the job's load (each submit and resume asks the silent
# server for its tables): quick_catalog_load.
pytestmark = [sqlite_only, pytest.mark.usefixtures("quick_catalog_load")]


@pytest.fixture
def silent_port():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)             # the kernel accepts; nothing ever reads or answers
    yield listener.getsockname()[1]
    listener.close()


def test_a_release_against_a_server_that_never_answers_waits_for_it(store, tmp_path, silent_port):
    _released_twice(store, tmp_path, _job_text("postgres", f"jdbc:postgresql://127.0.0.1:{silent_port}/test"))
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", fallback="fresh", actor="cli")
    message = str(refused.value)
    print(message)
    assert "trying again does not fix it" not in message, message
    assert "the leader tries again until the server can be reached" in message, message
    assert [r["lasting"] for r in _retries(store)] == [False, False]


def test_a_position_check_against_a_server_that_never_answers_says_it_could_not_be_reached(store, tmp_path,
                                                                                            silent_port):
    _stopped_as(store, tmp_path, _job_text("postgres", f"jdbc:postgresql://127.0.0.1:{silent_port}/test"))
    accepted = intents.resume(store, "j1", actor="cli")
    said = "\n".join(accepted.warnings)
    print(said)
    assert "the server answered the position check with an error" not in said, said
    assert "could not be reached" in said, said

