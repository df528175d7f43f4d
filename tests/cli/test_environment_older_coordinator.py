"""A submit or resume that sends its shell's environment to a coordinator from before recorded environments
(outside review M1): that version ignores ``environment`` and would fill the job's ``${NAME}``s from its own
process's environment. The command fails, saying so and what to do, and no job runs with those values: nothing is
sent to a coordinator that says it is older (no ``GET /api/v1/version``), and a job whose submit was answered by
one (coordinators of two versions behind one address, in the middle of an upgrade) is canceled at once.

Real processes: the seatide commands as a user runs them, against the REST app served on a real socket in this
process, its submit answered as the older version did (the environment ignored, the job's ``${NAME}``s read from
this process's environment, an answer without ``environmentRecorded``)."""

from __future__ import annotations

import json
import os

import pytest
from fastapi import Body
from sqlalchemy import select

from seatide import intents
from seatide.cli.http_client import HttpClient
from seatide.config.job_text import captured_environment
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.testing.cluster import wait_for
from tests.cli.test_captured_environment import cli, shell
from tests.cli.test_list_race import _serve, serving, without_routes  # noqa: F401  (serving is a fixture)

NAME = "SEATIDE_GATE_NAME"
JOB = f"""
env {{ job.mode = BATCH, job.name = ${{{NAME}}} }}
source {{ FakeSource {{ row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Console {{}} }}
"""


def answering_submits_as_older(app, store, data_dir) -> None:
    """The submit of the version before recorded environments: ``environment`` ignored, the text's ``${NAME}``s read
    from this process's environment, no ``environmentRecorded`` in the answer."""
    without_routes(app, "/api/v1/submit-job")

    @app.post("/api/v1/submit-job")
    def submit_as_older(body: dict = Body(...)):
        accepted = intents.submit(store, data_dir, text=body["config"], variables=body.get("variables") or {},
                                  job_id=body.get("jobId"), name=body.get("jobName"), actor="api:older",
                                  environment=captured_environment(body["config"], body.get("variables"), os.environ))
        return {"jobId": accepted.job_id, "jobName": accepted.job_name, "warnings": accepted.warnings}

    app.router.routes.insert(0, app.router.routes.pop())      # before the UI's mount


def older(app, store, data_dir) -> None:
    """A coordinator of the older version: no ``GET /api/v1/version``; its submit and resume ignore ``environment``."""
    without_routes(app, "/api/v1/version", "/api/v1/jobs/{job_id}/resume")
    answering_submits_as_older(app, store, data_dir)

    @app.post("/api/v1/jobs/{job_id}/resume")
    def resume_as_older(job_id: str, body: dict = Body(...)):
        text = body.get("config")
        accepted = intents.resume(store, job_id, text=text, variables=body.get("variables"),
                                  fallback=body.get("fallback"), actor="api:older",
                                  environment=captured_environment(text, body.get("variables"), os.environ))
        return {"jobId": accepted.job_id, "warnings": accepted.warnings}

    app.router.routes.insert(0, app.router.routes.pop())


@pytest.fixture
def coordinator_env(monkeypatch):
    monkeypatch.setenv(NAME, "coordinators-own")        # what the older version would fill the job with


@pytest.fixture
def serving_older(tmp_path, coordinator_env):
    yield from _serve(tmp_path, older=older)


@pytest.fixture
def serving_mixed(tmp_path, coordinator_env):
    """One address, two versions: the version asked by ``GET /api/v1/version`` is this one; the submit is
    answered by an older coordinator."""
    yield from _serve(tmp_path, older=answering_submits_as_older)


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "job.conf"
    path.write_text(JOB)
    return str(path)


def _jobs(store) -> list:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.job_id, s.jobs.c.incarnation, s.jobs.c.desired, s.jobs.c.status,
                                   s.jobs.c.variables).order_by(s.jobs.c.job_id)).all()


@pytest.mark.parametrize("module", ["seatide.cli.main", "seatide.cli.seatunnel"])
def test_nothing_is_submitted_to_a_coordinator_older_than_recorded_environments(serving_older, conf, module):
    url, store, _ = serving_older
    words = (("submit", conf, "--job-id", "gate", "--cluster", url) if module == "seatide.cli.main" else
             ("-c", conf, "-m", "cluster", "-cn", url, "--async", "-n", "gate"))
    result = cli(*words, module=module, env=shell(**{NAME: "as-submitted"}))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert f"the coordinator at {url} is older than this seatide command" in result.stderr
    assert f"would fill {NAME} from its own environment instead of this shell's. Nothing was submitted." in result.stderr
    assert "Upgrade every coordinator of the cluster to this version of SeaTide, or give the values with -i" in result.stderr
    assert "Traceback" not in result.stderr and "as-submitted" not in result.stderr
    assert _jobs(store) == []


def test_nothing_is_resumed_with_a_new_config_by_a_coordinator_older_than_recorded_environments(
        serving_older, conf, tmp_path):
    url, store, data_dir = serving_older
    intents.submit(store, data_dir, text=JOB, job_id="gate", actor="test", environment={NAME: "first"})
    intents.stop(store, "gate", actor="test")
    before = _jobs(store)
    result = cli("resume", "gate", "--config", conf, "--fallback", "fresh", "--cluster", url,
                 env=shell(**{NAME: "as-submitted"}))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "is older than this seatide command" in result.stderr and "Nothing was resumed." in result.stderr
    assert _jobs(store) == before


def test_a_job_an_older_coordinator_submitted_without_the_environment_is_canceled_at_once(serving_mixed, conf):
    url, store, _ = serving_mixed
    result = cli("submit", conf, "--job-id", "gate", "--cluster", url, env=shell(**{NAME: "as-submitted"}))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert (f"the coordinator at {url} was sent the environment of job gate's ${{NAME}}s ({NAME}) and did not say "
            "it recorded them: it is older than this seatide command") in result.stderr
    assert "Job gate was canceled at once (seatide status gate shows it" in result.stderr
    assert "Upgrade every coordinator of the cluster" in result.stderr and "Traceback" not in result.stderr
    [job] = _jobs(store)
    assert json.loads(job.variables) == {"$env": "1", f"$env.{NAME}": "coordinators-own"}    # what it would run with
    assert (job.job_id, job.desired) == ("gate", "CANCEL")
    leader = Coordinator(store, node_id="c1")

    def canceled():
        leader.lease.tick()
        leader.reconcile_all()
        return _jobs(store)[0].status == "CANCELED"
    wait_for(canceled, timeout=60, message="the job canceled by the leader, never started")


def test_a_coordinator_of_this_version_says_it_records_the_environment(serving):
    url, _, _ = serving
    client = HttpClient(url)
    assert client.call("GET", "/version")["recordsEnvironment"] is True
    answer = client.call("POST", "/submit-job", {"config": JOB, "jobId": "gate", "environment": {NAME: "given"}})
    assert answer["environmentRecorded"] == 1
    answer = client.call("POST", "/submit-job", {"config": JOB.replace(f"${{{NAME}}}", "plain"), "jobId": "plain"})
    assert answer["environmentRecorded"] == 0         # none given: an empty one, recorded
