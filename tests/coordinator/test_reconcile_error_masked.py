"""A job's reconcile failure is told masked (review 8, F9): a connector's exception quoting the job's password
showed it in the coordinator's log line (``log.exception``) and, cut to 2000 characters before masking, in the
RECONCILE_ERROR event when the password straddled the cut."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select

from seatide import intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import open_store

PASSWORD = "Pg-Secret-991xyz"
JOB = f"""
env {{ job.mode = BATCH }}
source {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", driver = "org.postgresql.Driver", user = "u",
  password = "{PASSWORD}", query = "select 1 as id" }} }}
sink {{ Console {{}} }}
"""


@pytest.fixture
def leader(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    coordinator = Coordinator(store, node_id="c-mask")
    assert coordinator.lease.tick()
    yield coordinator, store, str(tmp_path)
    store.dispose()


def test_a_reconcile_failure_quoting_the_password_is_logged_and_recorded_masked(leader, monkeypatch, caplog):
    coordinator, store, data_dir = leader
    intents.submit(store, data_dir, text=JOB, job_id="leaky", actor="test")
    padding = "x" * (2000 - len("ValueError: ") - 5)       # the password straddles the event's 2000th character

    def failing(snap, timeouts):
        raise ValueError(f"{padding} {PASSWORD} refused for jdbc:postgresql://u:{PASSWORD}@db/test")

    monkeypatch.setattr("seatide.coordinator.service.reconcile_job", failing)
    with caplog.at_level(logging.INFO):
        coordinator.reconcile_all()
    with store.read() as conn:
        errors = [e.detail for e in conn.execute(select(s.events).where(s.events.c.kind == "RECONCILE_ERROR"))]
    assert errors and "xxxx" in errors[0]
    told = caplog.text + "".join(errors)
    assert "reconcile failed" in caplog.text
    assert PASSWORD[:5] not in told and PASSWORD[-5:] not in told, told[-400:]
