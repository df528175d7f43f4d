"""Through the real REST app and store: a job's ``${NAME}`` never reads the coordinator's environment.

A REST request carries no environment, so a name the file falls back to the environment for is "not defined"
(a clear 400), whatever the coordinator's process has set; the seatide CLI sends what it captured from its shell
(``environment``), and the job runs with exactly that. A row stored before environments were recorded keeps
reading the process's, and a resume that changes nothing keeps it so; a REST resume that changes its text or
variables says why a name it read from the environment went undefined (outside review F1). What was captured
is masked wherever the job is shown (review F2). This module imports nothing new on purpose: on the code before
the change, each test fails on behaviour, not on an import.
"""

from __future__ import annotations

import json
import os

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from seatide.api.rest import create_app
from seatide.config.loader import load_job_text
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store

FILE_JOB = """
env {{ job.mode = BATCH{env} }}
source {{ FakeSource {{ row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ LocalFile {{ path = {path}, file_format_type = json }} }}
"""
COORDINATOR_ONLY = "Coordinator-Only-4417"


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The app and its store; the coordinator's own environment holds values no job may read."""
    for name in ("SEATIDE_TEST_TENANT", "PGPASSWORD", "SEATIDE_TEST_DIR"):
        monkeypatch.setenv(name, COORDINATOR_ONLY)
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    yield TestClient(create_app(store, data_dir, "test-node")), store
    store.dispose()


def job(path: str = '"/data/out"', env: str = "") -> str:
    return FILE_JOB.format(path=path, env=env)


def stored(store, job_id: str):
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.config, s.jobs.c.variables, s.jobs.c.name)
                            .where(s.jobs.c.job_id == job_id)).first()


def as_driver_reads(store, job_id: str):
    row = stored(store, job_id)
    return load_job_text(row.config, json.loads(row.variables), source_name=f"job {job_id}")


def sink_path(store, job_id: str) -> str:
    return as_driver_reads(store, job_id).sinks[0].plugin.opts["path"]


@pytest.mark.parametrize("config", [
    job(env=', job.name = "nightly-"${SEATIDE_TEST_TENANT}'),
    job(path='${SEATIDE_TEST_DIR}"/out"'),
    job().replace("file_format_type = json", "file_format_type = json, password = ${PGPASSWORD}"),
], ids=["job-name", "sink-path", "password"])
def test_a_rest_submit_never_reads_the_coordinators_environment(api, config):
    http, store = api
    response = http.post("/api/v1/submit-job", json={"config": config, "jobId": "leak"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "is not defined" in error and "environment of the seatide command" in error, error
    assert COORDINATOR_ONLY not in response.text
    assert stored(store, "leak") is None


def test_a_cli_submit_runs_with_the_environment_it_captured(api):
    http, store = api
    response = http.post("/api/v1/submit-job", json={
        "config": job(path='${SEATIDE_TEST_DIR}"/out"'), "jobId": "cli", "variables": {"tenant": "acme"},
        "environment": {"SEATIDE_TEST_DIR": "/from/the/submitter"}})
    assert response.status_code == 200, response.text
    assert json.loads(stored(store, "cli").variables) == {
        "tenant": "acme", "$env": "1", "$env.SEATIDE_TEST_DIR": "/from/the/submitter", "$as-given": "1"}
    assert sink_path(store, "cli") == "/from/the/submitter/out"       # not the coordinator's, set here too


def old_row(http, store, job_id: str, variables: dict) -> None:
    """A job as a SeaTide before this change stored it: its config falls back to the environment, its
    variables unmarked."""
    assert http.post("/api/v1/submit-job", json={"config": job(), "jobId": job_id}).status_code == 200
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(
            config=job(path='${SEATIDE_TEST_DIR}"/"${tenant}'), variables=json.dumps(variables)))


def test_an_old_unmarked_row_still_reads_the_process_environment(api):
    http, store = api
    old_row(http, store, "old", {"tenant": "acme"})
    assert sink_path(store, "old") == f"{COORDINATOR_ONLY}/acme"
    assert http.get("/api/v1/job-info/old").status_code == 200


def test_resuming_an_old_row_unchanged_keeps_it_as_it_was(api):
    http, store = api
    old_row(http, store, "old", {"tenant": "acme"})
    response = http.post("/api/v1/jobs/old/resume", json={"fallback": "fresh"})
    assert response.status_code == 200, response.text
    assert json.loads(stored(store, "old").variables) == {"tenant": "acme"}
    assert sink_path(store, "old") == f"{COORDINATOR_ONLY}/acme"


@pytest.mark.parametrize("change", [{"variables": {"tenant": "globex"}},
                                    {"config": job(path='${SEATIDE_TEST_DIR}"/new/"${tenant}')}],
                         ids=["new-variables", "new-config"])
def test_a_rest_resume_of_an_old_row_with_a_change_says_why_a_name_went_undefined(api, change):
    http, store = api
    old_row(http, store, "old", {"tenant": "acme"})
    response = http.post("/api/v1/jobs/old/resume", json={"fallback": "fresh", **change})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "${SEATIDE_TEST_DIR} is not defined" in error, error
    assert "submitted before SeaTide recorded the submitter's environment" in error, error
    assert "seatide resume old --config FILE" in error and "in the REST request's \"environment\" field" in error
    assert "in its \"variables\", as -i gives it" in error and "=VALUE" not in error, error
    assert COORDINATOR_ONLY not in response.text
    assert json.loads(stored(store, "old").variables) == {"tenant": "acme"}        # nothing recorded


def test_a_cli_resume_of_an_old_row_records_the_clis_environment(api):
    http, store = api
    old_row(http, store, "old", {"tenant": "acme"})
    response = http.post("/api/v1/jobs/old/resume", json={
        "fallback": "fresh", "config": job(path='${SEATIDE_TEST_DIR}"/"${tenant}'),
        "environment": {"SEATIDE_TEST_DIR": "/from/the/cli"}})
    assert response.status_code == 200, response.text
    assert json.loads(stored(store, "old").variables) == {"tenant": "acme", "$env": "1",
                                                          "$env.SEATIDE_TEST_DIR": "/from/the/cli"}
    assert sink_path(store, "old") == "/from/the/cli/acme"


def test_a_resume_with_new_variables_keeps_the_environment_recorded_with_the_job(api):
    http, store = api
    assert http.post("/api/v1/submit-job", json={
        "config": job(path='${SEATIDE_TEST_DIR}"/"${tenant}'), "jobId": "cli", "variables": {"tenant": "acme"},
        "environment": {"SEATIDE_TEST_DIR": "/from/the/submitter"}}).status_code == 200
    response = http.post("/api/v1/jobs/cli/resume", json={"fallback": "fresh", "variables": {"tenant": "globex"}})
    assert response.status_code == 200, response.text
    assert sink_path(store, "cli") == "/from/the/submitter/globex"


@pytest.mark.parametrize("variables", [{"$x": "1"}, {"$env": "1"}, {"$env.HOME": "/home/someone"}, {"": "1"}],
                         ids=["dollar", "mark", "entry", "empty"])
def test_a_variable_name_seatide_keeps_or_an_empty_one_is_refused(api, variables):
    http, store = api
    response = http.post("/api/v1/submit-job", json={"config": job(), "jobId": "named", "variables": variables})
    assert response.status_code == 400, response.text
    assert "variable" in response.json()["error"]
    assert stored(store, "named") is None
    assert http.post("/api/v1/submit-job", json={"config": job(), "jobId": "named"}).status_code == 200
    response = http.post("/api/v1/jobs/named/resume", json={"fallback": "fresh", "variables": variables})
    assert response.status_code == 400, response.text


def test_captured_values_are_masked_wherever_the_job_is_shown(api):
    http, store = api
    config = job(env=', job.name = "nightly-"${TENANT}', path='"/data/ACME-7731/out"') + "# for ACME-7731 only\n"
    response = http.post("/api/v1/submit-job", json={"config": config, "jobId": "masked",
                                                      "environment": {"TENANT": "ACME-7731"}})
    assert response.status_code == 200, response.text
    assert "ACME-7731" not in response.text
    shown = [http.get(path).text for path in ("/api/v1/job-info/masked", "/api/v1/jobs", "/metrics",
                                              "/job-info/masked", "/finished-jobs", "/running-jobs")]
    assert all("ACME-7731" not in text for text in shown), [t for t in shown if "ACME-7731" in t][0][:2000]
    assert "ACME-7731" not in stored(store, "masked").name
    assert as_driver_reads(store, "masked").env.name == "nightly-ACME-7731"      # the job itself has it in clear


def test_a_refusal_quoting_a_captured_value_masks_it(api):
    http, _ = api
    config = job().replace("row.num = 3", "row.num = ${ROWS}")
    response = http.post("/api/v1/submit-job", json={"config": config, "environment": {"ROWS": "ACME-7731x"}})
    assert response.status_code == 400, response.text
    assert "ACME-7731x" not in response.text and "row.num" in response.text


def test_a_rest_resume_of_an_old_row_with_an_empty_environment_says_why_a_name_went_undefined(api):
    """``{"environment": {}}`` marks an old row as a change does: it got a bare "not defined" (outside review L2)."""
    http, store = api
    old_row(http, store, "old", {"tenant": "acme"})
    response = http.post("/api/v1/jobs/old/resume", json={"fallback": "fresh", "environment": {}})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "${SEATIDE_TEST_DIR} is not defined" in error, error
    assert "submitted before SeaTide recorded the submitter's environment" in error, error
    assert COORDINATOR_ONLY not in response.text
    assert json.loads(stored(store, "old").variables) == {"tenant": "acme"}        # nothing recorded


@pytest.mark.parametrize("environment, said", [
    ({"$env": "x"}, "environment variable name '$env' is not one a config can refer to"),
    ({"x\ny": "x"}, "environment variable name 'x\\ny' is not one a config can refer to"),
    ({".": "x"}, "environment variable name '.' is not one a config can refer to"),
    ({"a..b": "x"}, "is not one a config can refer to"),
    ({f"N{i}": "v" for i in range(1001)}, "environment has 1001 names; at most 1000 may be given"),
    ({"BIG": "x" * (64 * 1024 + 1)}, "environment variable BIG: its value is 65537 bytes; at most 65536 (64 KiB)"),
], ids=["mark", "newline", "dot", "empty-part", "too-many", "too-long"])
def test_an_environment_no_config_could_use_or_too_big_is_refused_saying_which_rule(api, environment, said):
    """Names no text can look up were recorded with a 200, and the map had no bound (outside review L3)."""
    http, store = api
    response = http.post("/api/v1/submit-job", json={"config": job(), "jobId": "e", "environment": environment})
    assert response.status_code == 400, response.text[:500]
    assert said in response.json()["error"], response.json()["error"][:500]
    assert stored(store, "e") is None


def test_an_environment_name_a_config_can_refer_to_is_recorded(api):
    http, store = api
    environment = {"a.b-c": "1", "_X9": "2", "BIG": "x" * 64 * 1024}
    response = http.post("/api/v1/submit-job", json={"config": job(), "jobId": "e", "environment": environment})
    assert response.status_code == 200, response.text[:500]
