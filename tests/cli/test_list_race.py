"""``seatide list`` of a cluster shows each job once, even one that ends between its two reads.

A cluster answers the running jobs and the finished jobs in two requests: a job that finished after the first
was answered and before the second was listed in both, twice (RUNNING, then CANCELED). Its finished row is the
later one and is kept. The job ends between the two reads for sure: the finished list's handler is held at a
failpoint gate (``api.job_list@finished``) until the leader has cancelled it. The coordinator's REST app is
served by uvicorn on a real socket in this process (so the test can arm the gate and see it reached), over a real
SQLite store; the leader's reconcile runs as the coordinator's would; the CLI asks over HTTP.
"""
from __future__ import annotations

import json
import os
import socket
import threading
from types import SimpleNamespace

import pytest
import uvicorn
from sqlalchemy import select

from seatide import failpoints, intents
from seatide.api.rest import create_app
from seatide.cli.client import client_command
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.cluster import open_gate, wait_for
from seatide.testing.jobs import CONSOLE_JOB

HELD = "api.job_list@finished"


@pytest.fixture
def serving(tmp_path):
    """(URL, store, data dir): the REST app served on 127.0.0.1, on a SQLite store."""
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(store, data_dir, "c1"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=30, message="the REST app serving")
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", store, data_dir
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()
    store.dispose()


def test_a_job_that_ends_between_the_two_lists_is_listed_once_as_it_ended(serving, tmp_path, monkeypatch, capsys):
    url, store, data_dir = serving
    gate = str(tmp_path / "gate")
    monkeypatch.setitem(failpoints._POINTS, HELD, f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, HELD, 0)
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j1", actor="test")    # no worker: it waits, running
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j2", actor="test")
    leader = Coordinator(store, node_id="c1")
    assert leader.lease.tick()
    codes = []
    listing = threading.Thread(target=lambda: codes.append(client_command(SimpleNamespace(
        command="list", json=True, cluster=url, store=None, data_dir=data_dir, api_token_file=None))))
    listing.start()
    try:
        # The finished list's handler reached: the running list (both jobs) has been answered.
        wait_for(lambda: failpoints._HITS[HELD] == 1, timeout=60, message="the finished list's handler held")
        intents.stop(store, "j1", actor="test")

        def cancelled():
            leader.lease.tick()
            leader.reconcile_all()
            with store.read() as conn:
                return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "j1")).scalar() == "CANCELED"
        wait_for(cancelled, timeout=60, message="j1 cancelled by the leader")
    finally:
        open_gate(gate)       # a failed wait leaves neither the handler nor the CLI held
    listing.join(timeout=60)
    assert codes == [0], codes
    rows = json.loads(capsys.readouterr().out)
    assert sorted((row["jobId"], row["jobStatus"]) for row in rows) == [("j1", "CANCELED"), ("j2", "CREATED")], rows
