"""A request that changes something wakes this process's coordinator: a submit is picked
up at once, not at the next tick (here a minute away)."""

from __future__ import annotations

import os

from fastapi.testclient import TestClient
from sqlalchemy import select

from seatide.api.rest import create_app
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.testing.cluster import wait_for
from seatide.testing.jobs import CONSOLE_JOB as JOB


def _status(store, job_id):
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == job_id)).scalar()


def test_a_submit_wakes_the_coordinator_and_a_read_or_a_refusal_does_not(tmp_path):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    coordinator = Coordinator(store, node_id="c-wake", tick=60.0)
    woken = []
    app = create_app(store, data_dir, coordinator.node_id,
                     on_write=lambda: (woken.append(1), coordinator.wake()))
    coordinator.start()
    try:
        # The first pass (it takes the lease) is the only one for a minute, unless woken.
        wait_for(lambda: coordinator.lease.is_leader, 30, message="the lease")
        http = TestClient(app)
        assert http.post("/api/v1/submit-job", json={"config": "env {", "jobId": "bad"}).status_code == 400
        assert http.get("/api/v1/overview").status_code == 200
        assert woken == []
        assert http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "j1"}).status_code == 200
        assert woken == [1]
        wait_for(lambda: _status(store, "j1") != "CREATED", 20, interval=0.05,
                 message="the woken coordinator to take up the job")
    finally:
        coordinator.stop()
        store.dispose()
