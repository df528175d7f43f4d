"""SeaTunnel's REST API v2 at the root, in process: each endpoint with the request shapes its
page shows, answers held to the page field by field (tests/api/seatunnel_shapes.py).
Jobs that run to their end are in tests/cluster/test_seatunnel_api.py."""

from __future__ import annotations

import copy
import os
import time

import pytest
from fastapi.testclient import TestClient

from seatide.api.rest import create_app
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from tests.api import seatunnel_shapes as shapes
from tests.api.seatunnel_shapes import check_shape
from tests.config.test_shade import SEATUNNEL_EXAMPLE

# The submit-job body of the page, as sent by its users.
FAKE_TO_CONSOLE = {
    "env": {"job.mode": "batch"},
    "source": [{"plugin_name": "FakeSource", "result_table_name": "fake", "row.num": 100,
                "schema": {"fields": {"name": "string", "age": "int", "card": "int"}}}],
    "transform": [],
    "sink": [{"plugin_name": "Console", "source_table_name": ["fake"]}],
}


@pytest.fixture
def http(tmp_path):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    yield TestClient(create_app(store, data_dir, "test-node"))
    store.dispose()


def _submit(http, **params) -> dict:
    response = http.post("/submit-job", params=params, json=FAKE_TO_CONSOLE)
    assert response.status_code == 200, response.text
    return response.json()


def _refused(response, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "fail", body
    for fragment in fragments:
        assert fragment in body["message"], body


def test_submit_job_answers_a_numeric_job_id_and_the_name(http):
    answer = _submit(http, jobName="rest_api_test")
    check_shape(answer, shapes.SUBMITTED)
    assert answer["jobName"] == "rest_api_test"


def test_submit_job_with_a_job_id_keeps_it_and_a_name_that_is_not_a_number_stays_a_string(http):
    assert _submit(http, jobId="733584788375666689")["jobId"] == 733584788375666689
    assert _submit(http, jobId="orders-1")["jobId"] == "orders-1"


def test_submit_jobs_takes_params_in_each_body(http):
    bodies = [dict(copy.deepcopy(FAKE_TO_CONSOLE), params={"jobId": "123456", "jobName": "SeaTunnel-01"}),
              dict(copy.deepcopy(FAKE_TO_CONSOLE), params={"jobId": "1234567", "jobName": "SeaTunnel-02"})]
    response = http.post("/submit-jobs", json=bodies)
    assert response.status_code == 200, response.text
    check_shape(response.json(), [shapes.SUBMITTED_EACH])
    assert response.json() == [{"jobId": "123456", "jobName": "SeaTunnel-01"},
                               {"jobId": "1234567", "jobName": "SeaTunnel-02"}]


def test_running_jobs_and_job_info_of_a_running_job_have_the_pages_fields(http):
    job_id = str(_submit(http, jobName="shape")["jobId"])
    running = http.get("/running-jobs").json()
    check_shape(running, [shapes.RUNNING_JOB])
    assert [r["jobId"] for r in running] == [job_id]
    dag = running[0]["jobDag"]
    assert [(v["vertexId"], v["type"], v["vertexName"]) for v in dag["vertexInfoMap"]] == [
        (1, "source", "Source[0]-FakeSource"), (2, "sink", "Sink[0]-Console")]
    assert dag["pipelineEdges"] == {"1": [{"inputVertexId": 1, "targetVertexId": 2}]}
    assert running[0]["envOptions"] == {"job.mode": "batch"}
    info = http.get(f"/job-info/{job_id}")
    check_shape(info.json(), shapes.JOB_INFO_RUNNING)
    assert info.json()["jobName"] == "shape" and info.json()["jobStatus"] == "CREATED"
    deprecated = http.get(f"/running-job/{job_id}").json()
    assert deprecated["metrics"]["SourceReceivedCount"] == "0" and deprecated["metrics"]["TableSinkWriteCount"] == {}


def test_job_info_of_an_unknown_job_is_the_pages_answer_with_a_404(http):
    response = http.get("/job-info/733584788375666689")
    assert response.status_code == 404 and response.json() == {"jobId": "733584788375666689"}


def test_finished_jobs_by_state_and_a_state_that_does_not_exist(http):
    _submit(http)
    for path in ("/finished-jobs", "/finished-jobs/FINISHED", "/finished-jobs/canceled", "/finished-jobs/UNKNOWABLE"):
        response = http.get(path)
        assert response.status_code == 200 and response.json() == [], (path, response.text)
    _refused(http.get("/finished-jobs/RUNNING"), 400, "state must be one of CANCELED, FAILED, FINISHED")


def test_overview_counts_and_a_tag_filter_matches_no_worker(http):
    _submit(http)
    overview = http.get("/overview")
    check_shape(overview.json(), shapes.OVERVIEW)
    assert overview.json()["runningJobs"] == "1" and overview.json()["finishedJobs"] == "0"
    tagged = http.get("/overview", params={"tag1": "value1", "tag2": "value2"}).json()
    check_shape(tagged, shapes.OVERVIEW)
    assert (tagged["works"], tagged["totalSlot"], tagged["unassignedSlot"]) == ("0", "0", "0")
    assert tagged["runningJobs"] == "1"      # job counts stay cluster-wide, as the page says


def test_stop_job_and_stop_jobs_take_numeric_ids(http):
    first, second = _submit(http)["jobId"], _submit(http)["jobId"]
    response = http.post("/stop-job", json={"jobId": first, "isStopWithSavePoint": False})
    assert response.status_code == 200, response.text
    check_shape(response.json(), shapes.STOPPED)
    assert response.json() == {"jobId": first}
    response = http.post("/stop-jobs", json=[{"jobId": second, "isStopWithSavePoint": False}])
    assert response.status_code == 200 and response.json() == [{"jobId": second}]


def test_system_monitoring_information_has_every_key_of_the_page(http):
    answer = http.get("/system-monitoring-information").json()
    check_shape(answer, [shapes.MONITORING])
    assert len(answer) == 1 and int(answer[0]["processors"]) >= 1


@pytest.mark.parametrize("path", ["/encrypt-config", "/api/v1/encrypt-config"])
def test_encrypt_config_answers_the_pages_example(http, path):
    response = http.post(path, json=SEATUNNEL_EXAMPLE)
    assert response.status_code == 200, response.text
    encrypted = response.json()
    assert encrypted["source"][0]["password"] == "c2VhdHVubmVsX3Bhc3N3b3Jk"
    assert encrypted["sink"][0]["username"] == "c2VhdHVubmVs"
    assert encrypted["env"] == SEATUNNEL_EXAMPLE["env"]


def test_encrypt_config_with_an_unknown_shade_is_refused(http):
    tree = {**SEATUNNEL_EXAMPLE, "env": {"shade.identifier": "sm4"}}
    _refused(http.post("/encrypt-config", json=tree), 400, "shade.identifier 'sm4' is not known")
    assert http.post("/api/v1/encrypt-config", json=tree).status_code == 400


def test_a_base64_shaded_job_is_accepted_and_stored_encrypted(http):
    body = copy.deepcopy(FAKE_TO_CONSOLE)
    body["env"].update({"shade.identifier": "base64", "shade.options": ["row.num"]})
    body["source"][0]["row.num"] = "MTAw"            # "100"
    job_id = str(http.post("/submit-job", json=body).json()["jobId"])
    info = http.get(f"/job-info/{job_id}").json()
    assert info["jobStatus"] == "CREATED"
    body["source"][0]["row.num"] = "not base64!"
    _refused(http.post("/submit-job", json=body), 400, "source[0] FakeSource", "option 'row.num' does not decrypt")


def test_bad_requests_are_4xx_in_seatunnels_error_shape(http):
    _refused(http.post("/submit-job", content=b"{not json", headers={"Content-Type": "application/json"}), 400)
    _refused(http.post("/submit-job", json=[FAKE_TO_CONSOLE]), 400, "valid dictionary")
    _refused(http.post("/submit-job", json={"env": {}, "source": []}), 400, "the job has no source")
    _refused(http.post("/submit-job", params={"jobId": "../../etc"}, json=FAKE_TO_CONSOLE), 400, "is not allowed")
    _refused(http.post("/submit-job", params={"isStartWithSavePoint": "true"}, json=FAKE_TO_CONSOLE), 400,
             "needs the jobId")
    _refused(http.post("/submit-job", params={"isStartWithSavePoint": "maybe", "jobId": "x"}, json=FAKE_TO_CONSOLE),
             400, "isStartWithSavePoint must be true or false")
    _refused(http.post("/submit-job", params={"isStartWithSavePoint": "true", "jobId": "nobody"},
                       json=FAKE_TO_CONSOLE), 404, "no job with id nobody")
    _refused(http.post("/stop-job", json={"isStopWithSavePoint": True}), 400, "jobId")
    _refused(http.post("/stop-job", json={"jobId": 1}), 404, "no job with id 1")
    _refused(http.post("/submit-jobs", json=[dict(FAKE_TO_CONSOLE, params=[1])]), 400, "params must be an object")


def test_what_seatide_does_not_serve_says_so(http):
    _refused(http.post("/update-tags", json={"tag1": "dev_1"}), 404, "workers carry no tags")
    _refused(http.post("/submit-job/upload"), 404, "POST /submit-job")


def test_logs_list_is_empty_before_any_attempt_and_log_names_are_checked(http):
    assert http.get("/logs", params={"format": "json"}).json() == []
    assert http.get("/log", params={"format": "json"}).json() == []
    assert "<ul></ul>" in http.get("/logs").text
    _refused(http.get("/logs", params={"format": "xml"}), 400, "format must be html or json")
    _refused(http.get("/logs/job-..-attempt-1.log"), 400, "is not allowed")
    _refused(http.get("/logs/passwd.log"), 400, "is not a log name")
    _refused(http.get("/logs/job-nobody-attempt-7.log"), 404, "no log job-nobody-attempt-7.log")


def test_a_resume_with_is_start_with_savepoint_answers_its_warnings(http, tmp_path):
    """The resume's warnings (a config's, or a decision an earlier incarnation owed: store/owed_moves.py)
    are in its answer, as in REST v1's; without any the answer is SeaTunnel's, as before."""
    from seatide.coordinator.service import Coordinator

    _submit(http, jobId="resumed")
    store = open_store(default_store_url(str(tmp_path / "data")))
    coordinator = Coordinator(store, node_id="c-v2")
    try:
        for attempt in range(2):
            assert http.post("/stop-job", json={"jobId": "resumed"}).status_code == 200
            deadline = time.monotonic() + 30
            while http.get("/job-info/resumed").json()["jobStatus"] != "CANCELED":
                assert time.monotonic() < deadline, "the job was not cancelled"
                coordinator.lease.tick()
                coordinator.reconcile_all()
                time.sleep(0.05)
            config = FAKE_TO_CONSOLE if attempt else dict(FAKE_TO_CONSOLE, env={"job.mode": "batch", "paralelism": 2})
            response = http.post("/submit-job", params={"jobId": "resumed", "isStartWithSavePoint": "true"},
                                 json=config)
            assert response.status_code == 200, response.text
            answer = response.json()
            if attempt:
                assert answer == {"jobId": "resumed", "jobName": answer["jobName"]}, answer
            else:
                assert [w for w in answer["warnings"] if "paralelism" in w], answer
    finally:
        store.dispose()
