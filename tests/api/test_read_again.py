"""An API read whose store session the server ended is answered from a new session
(api/sessions.py); a write is not taken again by the API (its intent takes its own
transaction again, store/jobs.py)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from seatide.api.sessions import ReadAgainOnNewSession
from seatide.store.db import open_store
from tests.store.test_sessions import _terminated_under_a_read


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_read_whose_session_the_server_ended_is_answered_from_a_new_one(store_url):
    store = open_store(store_url)
    app = FastAPI()
    app.add_middleware(ReadAgainOnNewSession)
    calls = []

    def answer():
        calls.append(1)
        if len(calls) == 1:
            raise _terminated_under_a_read(store)
        with store.read() as conn:
            return {"answer": conn.execute(text("SELECT 42")).scalar()}

    app.get("/probe")(answer)
    app.post("/probe")(answer)
    try:
        client = TestClient(app, raise_server_exceptions=False)
        assert client.get("/probe").json() == {"answer": 42} and len(calls) == 2
        calls.clear()
        assert client.post("/probe").status_code == 500 and len(calls) == 1
    finally:
        store.dispose()
