"""A new ``seatide`` command and a coordinator from before recorded environments (outside review of envgate,
F1, F2, F4-F8).

Such a coordinator ignores the ``environment`` a request carries and records the job unmarked: every process
then fills its ``${NAME}``s from its own environment (the coordinator's ``${PGPASSWORD}`` in a job). The command
sends every submit and resume to routes only the versions that record environments serve (``POST /jobs``,
``POST /jobs/{id}/incarnations``): the older one answers 405 or 404, and nothing is recorded, whatever the job's
``${NAME}``s, set in the shell or not, with or without ``--config``. The older coordinator runs in a process of
its own with an environment of its own (``older_coordinator.py``: its submit and resume as that version's), the
command in another with the shell's, on one SQLite store.

One from before revision 0022 leading (its lease code too, ``older_coordinator.py lease``) cannot lead once the
store is upgraded past it, paused or not, and a marked job waits for this version's leader, then runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error

import pytest
from sqlalchemy import select

from seatide import intents
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import Store, open_store
from seatide.testing.cluster import free_port, http, wait_for
from tests.e2e.harness import InProcessCluster
from tests.store.test_recorded_environment_gate import at_revision_0021, register_as_older_conn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB = """
env { job.mode = BATCH, job.name = ${SEATIDE_GATE_NAME} }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""
OLDER_TOLD = "is older than this seatide command"


def _environment(**values) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("SEATIDE_GATE_NAME", "SEATIDE_CLUSTER")}
    return {**environment, **values}


def _serve(tmp_path, *mode: str):
    url, data_dir, port = f"sqlite:///{tmp_path}/state.db", str(tmp_path / "data"), free_port()
    os.makedirs(data_dir, exist_ok=True)
    store = open_store(url)          # the store as the upgrade left it; the job file beside it
    (tmp_path / "job.conf").write_text(JOB)
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "older_coordinator.py"), url, data_dir, str(port),
                                *mode], cwd=ROOT, env=_environment(SEATIDE_GATE_NAME="coordinators-own"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: process.poll() is not None or _answers(base),
                 timeout=60, message="the coordinator serving")
        assert process.poll() is None, process.stdout.read()
        yield base, store, data_dir
    finally:
        process.terminate()
        process.wait(timeout=30)
        store.dispose()


def _answers(base: str) -> bool:
    try:
        return http("GET", base + "/api/v1/overview")[0] == 200
    except urllib.error.URLError:
        return False


@pytest.fixture
def older(tmp_path):
    """(URL, store, data dir): a coordinator from before recorded environments, its SEATIDE_GATE_NAME its own."""
    yield from _serve(tmp_path)


@pytest.fixture
def current(tmp_path):
    yield from _serve(tmp_path, "current")


def seatide(*args: str, **shell: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seatide.cli.main", *args], cwd=ROOT, env=_environment(**shell),
                          capture_output=True, text=True, timeout=120)


def _rows(store) -> dict[str, tuple]:
    with store.read() as conn:
        return {row.job_id: (row.incarnation, row.name, json.loads(row.variables)) for row in conn.execute(
            select(s.jobs.c.job_id, s.jobs.c.incarnation, s.jobs.c.name, s.jobs.c.variables))}


def _ended_marked_job(store, data_dir: str) -> None:
    """Job ``marked``, recorded with its environment by a coordinator of this version elsewhere, then canceled."""
    intents.submit(store, data_dir, text=JOB, job_id="marked", actor="test",
                   environment={"SEATIDE_GATE_NAME": "as-submitted"})
    intents.stop(store, "marked", actor="test")
    leader = Coordinator(store, node_id="new-c")

    def canceled():
        leader.lease.tick()
        leader.reconcile_all()
        return _rows(store)["marked"] and store_status(store) == "CANCELED"

    wait_for(canceled, timeout=60, message="job marked canceled")
    leader.lease.resign()


def store_status(store) -> str:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == "marked")).scalar()


def _refused(answer: subprocess.CompletedProcess, url: str, what: str) -> None:
    assert answer.returncode == 1, (answer.stdout, answer.stderr)
    assert f"seatide: the coordinator at {url} {OLDER_TOLD}" in answer.stderr, answer.stderr
    assert f"Nothing was {what}. Upgrade every coordinator of the cluster" in answer.stderr, answer.stderr
    assert "Traceback" not in answer.stderr


@pytest.mark.parametrize("shell", [{}, {"SEATIDE_GATE_NAME": "as-submitted"}], ids=["unset", "set"])
def test_a_submit_to_an_older_coordinator_records_nothing(older, tmp_path, shell):
    # F1: with the name unset in the shell the command sent "environment": {}, and an older coordinator filled
    # ${SEATIDE_GATE_NAME} from its own ("coordinators-own").
    url, store, _ = older
    answer = seatide("submit", str(tmp_path / "job.conf"), "--job-id", "j", "--cluster", url, **shell)
    _refused(answer, url, "submitted")
    assert _rows(store) == {}


@pytest.mark.parametrize("options", [["-i", "other=1"], ["--config", "CONFIG"], []], ids=["i", "config", "bare"])
def test_a_resume_to_an_older_coordinator_changes_nothing(older, tmp_path, options):
    # F2: `resume marked -i other=1` was sent unchecked; the older coordinator stored {"other": "1"}, the mark gone,
    # and every process then read SEATIDE_GATE_NAME from its own environment.
    url, store, data_dir = older
    _ended_marked_job(store, data_dir)
    before = _rows(store)
    options = [str(tmp_path / "job.conf") if option == "CONFIG" else option for option in options]
    answer = seatide("resume", "marked", *options, "--cluster", url, SEATIDE_GATE_NAME="as-submitted")
    _refused(answer, url, "resumed")
    assert _rows(store) == before
    assert before["marked"][2]["$env.SEATIDE_GATE_NAME"] == "as-submitted"


def test_a_current_coordinator_records_the_shells_environment(current, tmp_path):
    url, store, _ = current
    submitted = seatide("submit", str(tmp_path / "job.conf"), "--job-id", "j", "--cluster", url,
                        SEATIDE_GATE_NAME="as-submitted")
    assert submitted.returncode == 0, submitted.stderr
    assert _rows(store)["j"][2] == {"$env": "1", "$env.SEATIDE_GATE_NAME": "as-submitted", "$as-given": "1"}
    # A job it does not know is its own refusal (404 "no job"), not the older version's missing route.
    unknown = seatide("resume", "nosuch", "-i", "other=1", "--cluster", url)
    assert unknown.returncode == 1 and "no job with id nosuch" in unknown.stderr, unknown.stderr
    assert OLDER_TOLD not in unknown.stderr


RUN = """
env { job.mode = BATCH, job.name = gate-run, job.retry.times = 0 }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { LocalFile { path = ${SEATIDE_GATE_DIR}"/out", file_format_type = json } }
"""


def test_an_older_leader_paused_past_any_heartbeat_window_cannot_lead_after_the_upgrade(tmp_path, spark, monkeypatch):
    """Outside review 2, finding 5: a coordinator of the SeaTide from before recorded environments, leading on the
    store at 0021, paused (SIGSTOP) with its heartbeat an hour old, out of the 60 s window the gate had. Once the
    store is at 0022 it can neither renew, nor write as leader, nor be elected; the marked job waits for this
    version's leader, then runs with the values its submitter recorded."""
    data_dir = str(tmp_path / "data")
    url = default_store_url(data_dir)
    store = open_store(url)
    at_revision_0021(store)
    store.dispose()
    own = {"SEATIDE_GATE_DIR": str(tmp_path / "coordinators-own")}
    base, process = _older_leader(url, data_dir, own)
    harness = None
    try:
        held = _post(base, "/older/lease")
        assert (held["leader"], held["epoch"]) == (True, 1), held
        assert _post(base, "/older/write", {"epoch": 1}) == {"wrote": True}
        older_store = Store(url)         # its presence row, as that version wrote it, an hour old
        with older_store.write() as conn:
            register_as_older_conn(conn, "older-c", "coordinator", heartbeat_ago=3600.0)
        older_store.dispose()
        os.kill(process.pid, signal.SIGSTOP)

        monkeypatch.setenv("SEATIDE_GATE_DIR", str(tmp_path / "this-process"))   # nor this process's
        harness = InProcessCluster(spark, data_dir)      # this version: the upgrade to 0022, a worker of its own
        recorded = str(tmp_path / "as-submitted")
        with pytest.raises(intents.Refusal, match="Nothing was submitted"):
            _submit_run(harness, recorded)
        assert _rows(harness.store) == {}

        os.kill(process.pid, signal.SIGCONT)
        lost = wait_for(lambda: (lambda answer: None if answer["leader"] else answer)(_post(base, "/older/lease")),
                        timeout=30, message="the older leader to lose its lease")
        assert lost["losses"] == ["could not renew in time"], lost
        assert any("leader_lease" in line for line in lost["failed"]), lost
        refused = _post(base, "/older/write", {"epoch": 1})
        assert not refused["wrote"] and "leader_lease" in refused["error"], refused
        again = _post(base, "/older/lease")               # nor can it be elected
        assert (again["leader"], again["epoch"]) == (False, None) and again["failed"], again

        wait_for(harness.coordinator.lease.tick, timeout=30, message="this version's coordinator elected")
        assert harness.coordinator.lease.epoch == 2
        job_id = _submit_run(harness, recorded).job_id
        run = harness.drive(job_id)
        assert run.status == "FINISHED", (run.error, run.stdout[-2000:])
        assert sorted(os.listdir(recorded)) == ["out"] and os.listdir(os.path.join(recorded, "out"))
        assert not os.path.exists(own["SEATIDE_GATE_DIR"]) and not os.path.exists(tmp_path / "this-process")
        assert not _post(base, "/older/lease")["leader"]
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        process.wait(timeout=30)
        if harness is not None:
            harness.coordinator.lease.resign()
            harness.store.dispose()


def _older_leader(url: str, data_dir: str, own: dict[str, str]):
    """(base URL, process): the older coordinator with its lease (``older_coordinator.py lease``), serving."""
    port = free_port()
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "older_coordinator.py"), url, data_dir, str(port),
                                "lease"], cwd=ROOT, env=_environment(**own), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: process.poll() is not None or _answers(base), timeout=60,
                 message="the older coordinator serving")
        assert process.poll() is None, process.stdout.read()
    except BaseException:
        process.kill()
        process.wait(timeout=30)
        raise
    return base, process


def _post(base: str, path: str, body: dict | None = None) -> dict:
    status, answer = http("POST", base + path, body or {})
    assert status == 200, (status, answer)
    return answer


def _submit_run(harness, recorded: str):
    return intents.submit(harness.store, harness.data_dir, text=RUN, job_id="marked", actor="test",
                          environment={"SEATIDE_GATE_DIR": recorded})
