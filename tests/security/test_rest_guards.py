"""The REST API's guards, in process: the token, the body limit, hostile ids, 4xx not 5xx."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from seatide.api.auth import TokenError, load_token
from seatide.api.rest import create_app
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.store.paths import PathOutsideRoot, driver_log_path, under

TOKEN = "t0ken-for-tests"
JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


@pytest.fixture
def app_on(tmp_path):
    """``app_on(**create_app options)`` -> a TestClient on a fresh SQLite store."""
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))

    def make(**options):
        return TestClient(create_app(store, data_dir, "test-node", **options), raise_server_exceptions=False)

    make.data_dir, make.store = data_dir, store
    yield make
    store.dispose()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_mutating_calls_need_the_token_on_every_path_reads_stay_open(app_on):
    http = app_on(api_token=TOKEN)
    refused = http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "guarded"})
    assert refused.status_code == 401
    assert "Authorization: Bearer <token>" in refused.json()["error"]
    assert refused.headers["www-authenticate"] == "Bearer"
    assert http.post("/api/v1/submit-job", json={"config": JOB}, headers=bearer("wrong")).status_code == 401
    # Keyed on the method, app-wide: paths other helpers add (SeaTunnel's, at the root) are covered too.
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert http.request(method, "/submit-job", json={}).status_code == 401, method
    accepted = http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "guarded"}, headers=bearer(TOKEN))
    assert accepted.status_code == 200, accepted.text
    assert http.get("/api/v1/job-info/guarded").status_code == 200
    assert http.get("/api/v1/overview").status_code == 200
    assert http.get("/metrics").status_code == 200


def test_auth_reads_closes_reads_and_metrics(app_on):
    http = app_on(api_token=TOKEN, auth_reads=True)
    for path in ("/api/v1/overview", "/api/v1/running-jobs", "/metrics", "/api/v1/openapi.json"):
        assert http.get(path).status_code == 401, path
        assert http.get(path, headers=bearer(TOKEN)).status_code == 200, path


def test_without_a_token_nothing_is_asked(app_on):
    assert app_on().post("/api/v1/submit-job", json={"config": JOB}).status_code == 200


def test_token_comes_from_the_file_then_the_environment(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    assert load_token(str(path), {"SEATIDE_API_TOKEN": "other"}) == TOKEN
    assert load_token(None, {"SEATIDE_API_TOKEN": " from-env "}) == "from-env"
    assert load_token(None, {}) is None


@pytest.mark.parametrize("content, mode, says", [
    (None, 0o600, "cannot read the API token file"),
    ("  \n", 0o600, "is empty"),
    (TOKEN, 0o644, "readable by every user"),
])
def test_an_unusable_token_file_is_refused_with_the_fix(tmp_path, content, mode, says):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
        path.chmod(mode)
    with pytest.raises(TokenError, match=says):
        load_token(str(path), {})


def test_a_body_over_the_limit_is_413_declared_or_streamed(app_on):
    http = app_on(max_request_bytes=2048)
    big = {"config": JOB + "#" * 4096}
    declared = http.post("/api/v1/submit-job", json=big)
    assert declared.status_code == 413
    assert "larger than the limit of 2048 bytes" in declared.json()["error"]
    streamed = http.post("/api/v1/submit-job", content=iter([b'{"config": "', b"x" * 3000, b'"}']),
                         headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413
    assert http.post("/api/v1/submit-job", json={"config": JOB}).status_code == 200


@pytest.mark.parametrize("job_id", ["../../etc", "..", "a/b", "x" * 65])
def test_hostile_job_ids_in_stop_and_resume_are_400(app_on, job_id):
    http = app_on()
    assert http.post("/api/v1/stop-job", json={"jobId": job_id}).status_code == 400
    response = http.post(f"/api/v1/jobs/{job_id.replace('/', '%2F')}/resume", json={})
    assert response.status_code in (400, 404), response.text     # a slash never reaches the route as one id
    assert "Traceback" not in response.text


@pytest.mark.parametrize("savepoint", ["../x", -1, 0, 2**70])
def test_hostile_savepoint_ids_are_refused(app_on, savepoint):
    http = app_on()
    http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "sp"})
    response = http.post("/api/v1/jobs/sp/resume", json={"fromSavepoint": savepoint})
    assert response.status_code == 422, response.text
    assert "fromSavepoint" in response.json()["error"]


def test_paths_from_request_input_stay_under_their_root(tmp_path):
    root = str(tmp_path)
    assert under(root, "a", "b") == os.path.join(root, "a", "b")
    for parts in (("..",), ("a", "../.."), ("/etc",), ("",), ("a\0b",), (".",)):
        with pytest.raises(PathOutsideRoot):
            under(root, *parts)
    assert driver_log_path(root, "job-1", 7) == os.path.join(root, "logs", "job-1", "attempt-7.log")
    with pytest.raises(Exception, match="is not allowed"):
        driver_log_path(root, "../job", 7)


@pytest.mark.parametrize("request_body, says", [
    ({"config": JOB.replace("BATCH }", "BATCH, job.retry.times = 99999999999999999999 }")}, "at most 2147483647"),
    ({"config": JOB, "jobName": "n" * 300}, "at most 256"),
    ({"config": JOB, "jobId": "x" * 65}, "is not allowed"),
    ({"config": 12}, "body.config"),
    ({"config": JOB, "variables": {"a": {"b": 1}}}, "body.variables.a"),
])
def test_malformed_requests_are_4xx_with_what_was_wrong(app_on, request_body, says):
    response = app_on().post("/api/v1/submit-job", json=request_body)
    assert 400 <= response.status_code < 500, response.text
    assert says in response.json()["error"]


def test_a_huge_checkpoint_limit_is_422_not_an_overflow(app_on):
    http = app_on()
    http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "lim"})
    assert http.get("/api/v1/jobs/lim/checkpoints?limit=99999999999999999999").status_code == 422
    assert http.get("/api/v1/jobs/lim/checkpoints?limit=5").status_code == 200


def test_a_validation_error_does_not_echo_the_config_back(app_on):
    response = app_on().post("/api/v1/submit-job", json={"config": 'x { password = "Echo-Me-Not-1" }',
                                                         "jobId": ["not", "a", "string"]})
    assert response.status_code == 422
    assert "Echo-Me-Not-1" not in response.text


def test_a_refusal_that_quotes_a_secret_variable_masks_it(app_on):
    config = JOB.replace("row.num = 3", "row.num = ${tenant}").replace("BATCH }", "BATCH, secret.variables = [tenant] }")
    response = app_on().post("/api/v1/submit-job", json={"config": config, "variables": {"tenant": "Tenant-Secret-2"}})
    assert response.status_code == 400
    assert "row.num" in response.json()["error"] and "Tenant-Secret-2" not in response.text


# 5,000 nested lists in a job's text; 300 in a JSON body (JSON far deeper does not get past the
# body's parser). Each route answers 400 naming the limit and the fix: before, a RecursionError
# made the text routes a 500 (or took a worker down), and /encrypt-config copied the tree recursively.
DEEP_TEXT = JOB.replace("row.num = 3", "x = " + "[" * 5000 + "]" * 5000 + ", row.num = 3")
DEEP_TREE = {"env": {"shade.identifier": "base64"}, "sink": [{"plugin_name": "Console"}],
             "source": [{"plugin_name": "FakeSource", "password": "pw", "x": [[]]}]}
for _ in range(300):
    DEEP_TREE["source"][0]["x"] = [DEEP_TREE["source"][0]["x"]]


@pytest.mark.parametrize("path, body", [
    ("/api/v1/submit-job", {"config": DEEP_TEXT}),
    ("/api/v1/submit-jobs", [{"config": DEEP_TEXT}]),
    ("/submit-job", DEEP_TREE),
    ("/submit-jobs", [DEEP_TREE]),
    ("/api/v1/encrypt-config", DEEP_TREE),
    ("/encrypt-config", DEEP_TREE),
])
def test_a_job_nested_past_the_limit_is_400_naming_the_limit(app_on, path, body):
    response = app_on().post(path, json=body)
    assert response.status_code == 400, response.text
    message = response.json().get("error") or response.json().get("message") or response.json()["detail"]
    assert "more than 100 levels deep" in message and "flatter" in message, message


def test_a_variable_whose_value_breaks_the_parse_is_named_and_its_value_not_shown(app_on):
    # A value is written so that it arrives as given (config/pasted_values.py); a list is read as one, and
    # joined to text it does not parse.
    config = JOB.replace("row.num = 3", "row.num = 3, password = x${pw}")
    response = app_on().post("/api/v1/submit-job", json={"config": config, "variables": {"pw": '["Rest\\"Pw,9"]'}})
    assert response.status_code == 400, response.text
    assert "variable pw does not parse here" in response.json()["error"]
    assert not any(piece in response.text for piece in ("Rest", 'st"P', "Pw,9"))


@pytest.mark.parametrize("path", ["/submit-job", "/submit-jobs", "/api/v1/encrypt-config", "/encrypt-config",
                                  "/api/v1/submit-job"])
def test_a_json_body_too_deep_for_the_json_reader_is_400_saying_so(app_on, path):
    """5,000 nested lists stop Python's JSON reader itself (RecursionError): FastAPI's answer was a
    bare "There was an error parsing the body"."""
    body = '{"config": ' + "[" * 5000 + "]" * 5000 + "}"
    response = app_on().post(path, content=body if path != "/submit-jobs" else f"[{body}]",
                             headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert "nests objects and lists too deep to read" in response.text and "flatter" in response.text
