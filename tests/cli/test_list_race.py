"""``seatide list`` of a cluster shows every job once, however jobs move while it reads.

A coordinator answers every job from one store read (``GET /api/v1/jobs``, review 7 F2): before, the CLI read the
running jobs and then the finished jobs, and a job resumed between the two reads was in neither (not shown, exit 0);
one that ended between them was in both. A coordinator of the version before (a rolling upgrade: its 404) is
asked the two lists and the running list again at the end, each job shown once as the last read has it; a read
that fails leaves the jobs read shown, names what failed on stderr, and exits 1 (review 6, F1).

The coordinator's REST app is served by uvicorn on a real socket in this process (so a test can hold a list's
handler at a failpoint gate, ``api.job_list@finished``, and see it reached, or make one fail), over a real SQLite
store; the older version is the same app without ``/api/v1/jobs``. The leader's reconcile runs as the
coordinator's would; the CLI asks over HTTP.
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
from seatide.cli import seatunnel
from seatide.cli.client import client_command
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.testing.cluster import open_gate, wait_for
from seatide.testing.jobs import CONSOLE_JOB

HELD = "api.job_list@finished"


def _serve(tmp_path, older: bool):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    app = create_app(store, data_dir, "c1")
    if older:       # the version before GET /api/v1/jobs: a 404 for it
        app.router.routes[:] = [route for route in app.router.routes if getattr(route, "path", "") != "/api/v1/jobs"]
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=30, message="the REST app serving")
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", store, data_dir
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()
    store.dispose()


@pytest.fixture
def serving(tmp_path):
    """(URL, store, data dir): the REST app served on 127.0.0.1, on a SQLite store."""
    yield from _serve(tmp_path, older=False)


@pytest.fixture
def serving_older(tmp_path):
    """``serving``, of the version before ``GET /api/v1/jobs``."""
    yield from _serve(tmp_path, older=True)


def _list(url: str, data_dir: str, json_out: bool = True) -> int:
    return client_command(SimpleNamespace(command="list", json=json_out, cluster=url, store=None, data_dir=data_dir,
                                          api_token_file=None))


def _status(store, job_id: str) -> str:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == job_id)).scalar()


def _two_jobs_one_cancelled(store, data_dir) -> Coordinator:
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j1", actor="test")    # no worker: they wait, running
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j2", actor="test")
    leader = Coordinator(store, node_id="c1")
    assert leader.lease.tick()
    intents.stop(store, "j1", actor="test")
    _cancelled(leader, store)
    return leader


def _cancelled(leader, store) -> None:
    def done():
        leader.lease.tick()
        leader.reconcile_all()
        return _status(store, "j1") == "CANCELED"
    wait_for(done, timeout=60, message="j1 cancelled by the leader")


def _listed_while_held(url, data_dir, gate, meanwhile, capsys) -> tuple[list, list]:
    """(exit codes, rows) of ``seatide list --json`` with ``meanwhile`` done while the finished list is held."""
    codes = []
    listing = threading.Thread(target=lambda: codes.append(_list(url, data_dir)))
    listing.start()
    try:
        # The finished list's handler reached: the running list has been answered.
        wait_for(lambda: failpoints._HITS[HELD] == 1, timeout=60, message="the finished list's handler held")
        meanwhile()
    finally:
        open_gate(gate)       # a failed wait leaves neither the handler nor the CLI held
    listing.join(timeout=60)
    return codes, json.loads(capsys.readouterr().out)


def _hold_finished_list(monkeypatch, gate: str) -> None:
    monkeypatch.setitem(failpoints._POINTS, HELD, f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, HELD, 0)


def test_every_job_comes_from_one_read(serving, monkeypatch, capsys):
    """The two lists' handlers fail: ``list`` and ``seatide-seatunnel -l`` ask neither."""
    url, store, data_dir = serving
    _two_jobs_one_cancelled(store, data_dir)
    for scope in ("running", "finished"):
        monkeypatch.setitem(failpoints._POINTS, f"api.job_list@{scope}", "raise")
    assert _list(url, data_dir) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["jobId"], row["jobStatus"]) for row in rows] == [("j1", "CANCELED"), ("j2", _status(store, "j2"))]
    assert "checkpoint" in rows[1] and "checkpoint" not in rows[0], rows     # shaped as the two lists' rows
    assert seatunnel.main(["-l", "-cn", url]) == 0
    assert [row["jobId"] for row in json.loads(capsys.readouterr().out)] == ["j1", "j2"]


def test_an_older_coordinators_job_that_ends_between_the_reads_is_listed_once_as_it_ended(
        serving_older, tmp_path, monkeypatch, capsys):
    url, store, data_dir = serving_older
    _hold_finished_list(monkeypatch, str(tmp_path / "gate"))
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j1", actor="test")
    intents.submit(store, data_dir, text=CONSOLE_JOB, job_id="j2", actor="test")
    leader = Coordinator(store, node_id="c1")
    assert leader.lease.tick()

    def cancel():
        intents.stop(store, "j1", actor="test")
        _cancelled(leader, store)
    codes, rows = _listed_while_held(url, data_dir, str(tmp_path / "gate"), cancel, capsys)
    assert codes == [0], codes
    assert sorted(row["jobId"] for row in rows) == ["j1", "j2"], rows       # each once
    assert [row["jobStatus"] for row in rows if row["jobId"] == "j1"] == ["CANCELED"], rows


def test_an_older_coordinators_job_resumed_between_the_reads_is_listed(serving_older, tmp_path, monkeypatch, capsys):
    """Review 7, F2: j1 ended before the running list was read and was resumed before the finished list was: in
    neither list, it was not shown, and the exit was 0. The running list read again at the end has it."""
    url, store, data_dir = serving_older
    _two_jobs_one_cancelled(store, data_dir)
    _hold_finished_list(monkeypatch, str(tmp_path / "gate"))
    codes, rows = _listed_while_held(url, data_dir, str(tmp_path / "gate"),
                                     lambda: intents.resume(store, "j1", actor="test"), capsys)
    assert codes == [0], codes
    assert sorted(row["jobId"] for row in rows) == ["j1", "j2"], rows
    assert [row["jobStatus"] for row in rows if row["jobId"] == "j1"] == [_status(store, "j1")] != ["CANCELED"], rows


@pytest.mark.parametrize("failing, shown", [("finished", ["j2"]), ("running", ["j1"])])
def test_an_older_coordinators_list_that_fails_leaves_the_others_jobs_shown(serving_older, monkeypatch, capsys,
                                                                            failing, shown):
    """Review 6, F1 (moved here from a cluster test: the CLI over HTTP is what is tested): the jobs read are printed
    (--json: the array alone on stdout), stderr names the list not read, the exit is 1, never a traceback."""
    url, store, data_dir = serving_older
    _two_jobs_one_cancelled(store, data_dir)
    monkeypatch.setitem(failpoints._POINTS, f"api.job_list@{failing}", "raise")
    assert _list(url, data_dir, json_out=False) == 1
    out = capsys.readouterr()
    assert [line.split()[0] for line in out.out.splitlines()[1:]] == shown, out.out
    assert f"the {failing} jobs are not shown" in out.err and "500" in out.err, out.err
    for command in (lambda: _list(url, data_dir), lambda: seatunnel.main(["-l", "-cn", url])):
        assert command() == 1
        out = capsys.readouterr()
        assert [job["jobId"] for job in json.loads(out.out)] == shown, out.out
        assert f"the {failing} jobs are not shown" in out.err and "Traceback" not in out.err, out.err
