"""SeaTunnel's REST API v2 against a real cluster on SQLite and PostgreSQL: a job submitted at
the root runs to FINISHED; a stop with savepoint leaves SAVEPOINT_DONE, and a submission with
isStartWithSavePoint=true resumes it where it stopped."""

from __future__ import annotations

import urllib.request

import pytest

from tests.api import seatunnel_shapes as shapes
from tests.api.seatunnel_shapes import check_shape
from seatide.testing.cluster import Cluster, http, wait_for
from seatide.testing.jobs import assert_exactly, written_ids
from tests.stores import sqlite_only

pytestmark = pytest.mark.cluster


def _fake_to_json(out: str, mode: str, **fake) -> dict:
    """A JSON job as SeaTunnel's clients send it: FakeSource -> LocalFile (JSON lines)."""
    return {
        "env": {"job.mode": mode, "checkpoint.interval": 1000, "job.retry.interval.seconds": 1},
        "source": [{"plugin_name": "FakeSource", "result_table_name": "fake", "sequence.field": "id",
                    "schema": {"fields": {"id": "bigint", "name": "string"}}, **fake}],
        "transform": [],
        "sink": [{"plugin_name": "LocalFile", "source_table_name": ["fake"], "path": out,
                  "file_format_type": "json"}],
    }


def _post(cluster: Cluster, path: str, body) -> dict:
    status, answer = http("POST", cluster.any_coordinator().url + path, body)
    assert status == 200, answer
    return answer


def _get(cluster: Cluster, path: str):
    status, answer = http("GET", cluster.any_coordinator().url + path)
    assert status == 200, answer
    return answer


@sqlite_only
def test_a_job_submitted_at_the_root_runs_to_finished(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    cluster.worker("w1")
    answer = _post(cluster, "/submit-job?jobName=rest_api_test", _fake_to_json(out, "BATCH", **{"row.num": 50}))
    check_shape(answer, shapes.SUBMITTED)
    job_id = str(answer["jobId"])
    cluster.wait_status(job_id, {"FINISHED", "FAILED"}, timeout=240)
    info = _get(cluster, f"/job-info/{job_id}")
    check_shape(info, shapes.JOB_INFO_FINISHED)
    assert (info["jobStatus"], info["jobName"], info["errorMsg"]) == ("FINISHED", "rest_api_test", None)
    assert info["metrics"] == {"sourceReceivedCount": "50", "sinkWriteCount": "50"}
    finished = _get(cluster, "/finished-jobs/FINISHED")
    check_shape(finished, [shapes.FINISHED_JOB])
    assert [f["jobId"] for f in finished] == [job_id]
    assert _get(cluster, "/overview")["finishedJobs"] == "1"
    assert_exactly(written_ids(out), range(50))
    logs = _get(cluster, "/logs?format=json")
    check_shape(logs, [shapes.LOG_ENTRY])
    assert logs and all(log["logName"].startswith(f"job-{job_id}-attempt-") for log in logs)
    with urllib.request.urlopen(logs[0]["logLink"], timeout=5) as response:
        assert response.status == 200 and response.read()


# In the soak set (CI time): CI stops a job with a savepoint through this endpoint and resumes
# it in tests/cluster/test_checkpoints.py (PostgreSQL); the request and answer shapes of both
# endpoints are checked in tests/api/test_seatunnel_v2.py.
@pytest.mark.soak
@sqlite_only
def test_stop_with_savepoint_then_submit_with_is_start_with_savepoint_resumes(cluster: Cluster, tmp_path):
    out = str(tmp_path / "out")
    cluster.coordinator("c1")
    cluster.worker("w1")
    job = _fake_to_json(out, "STREAMING", **{"row.num": 20000, "split.num": 2000, "split.read-interval": 300})
    answer = _post(cluster, "/submit-job?jobId=st-savepoint&jobName=stream", job)
    assert answer == {"jobId": "st-savepoint", "jobName": "stream"}      # not a number: stays a string
    wait_for(lambda: (cluster.job_info("st-savepoint")["checkpoint"]["lastCheckpointId"] or 0) >= 2, 180,
             message="two checkpoints")
    check_shape(_get(cluster, "/running-jobs"), [shapes.RUNNING_JOB])
    _post(cluster, "/stop-job", {"jobId": "st-savepoint", "isStopWithSavePoint": True})
    cluster.wait_status("st-savepoint", "SAVEPOINT_DONE", timeout=120)
    stopped = written_ids(out)
    assert_exactly(stopped, range(len(stopped)))

    _post(cluster, "/submit-job?jobId=st-savepoint&isStartWithSavePoint=true", job)
    cluster.wait_status("st-savepoint", "RUNNING", timeout=120)
    info = _get(cluster, "/job-info/st-savepoint")
    check_shape(info, shapes.JOB_INFO_RUNNING)
    assert info["isStartWithSavePoint"] is True and cluster.job("st-savepoint").incarnation == 2
    wait_for(lambda: len(written_ids(out)) > len(stopped) + 20, 120, message="rows after the savepoint")
    assert _post(cluster, "/stop-jobs", [{"jobId": "st-savepoint", "isStopWithSavePoint": False}]) == [
        {"jobId": "st-savepoint"}]
    cluster.wait_status("st-savepoint", "CANCELED", timeout=90)
    total = written_ids(out)
    assert_exactly(total, range(len(total)))     # no gap and no duplicate across the savepoint
    assert len(total) > len(stopped)
