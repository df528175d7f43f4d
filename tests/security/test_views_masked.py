"""Every REST answer about a job, in process (FastAPI's TestClient on SQLite): none shows its secrets (review 8).

SeaTunnel's views (``/running-jobs``, ``/job-info``, ``/running-job``, ``/finished-jobs``) showed the env options
in clear, ``spark.hadoop.fs.s3a.secret.key`` among them (F1); and a job name, a plan's output and a DAG's table
path made of a secret variable showed its value in every view and in /metrics' labels (F5). Jobs recorded
before the fix (their outline and name as stored then) are masked on the way out too, where the view reads the
config.
"""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from seatide.api.rest import create_app
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store

TENANT, ACCESS, SECRET = "ACME-7731", "AKIAEXAMPLE12345", "wJalrXUtnFEMI-K7MDENG"
JOB = """
env {
  job.mode = "BATCH"
  job.name = "nightly-${tenant}"
  secret.variables = [tenant]
  spark.hadoop.fs.s3a.access.key = "%s"
  spark.hadoop.fs.s3a.secret.key = "%s"
  spark.executor.memory = "1g"
}
source { LocalFile { path = "/data/${tenant}/in", file_format_type = "parquet", plugin_output = "rows_${tenant}" } }
sink { LocalFile { path = "/out/${tenant}", file_format_type = "parquet" } }
""" % (ACCESS, SECRET)
VIEWS = ["/api/v1/job-info/j1", "/api/v1/jobs", "/api/v1/jobs/j1/plan", "/api/v1/jobs/j1/events", "/running-jobs",
         "/job-info/j1", "/running-job/j1", "/metrics", "/api/v1/finished-jobs/FAILED", "/finished-jobs/FAILED"]


@pytest.fixture
def client(tmp_path):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    app = TestClient(create_app(store, data_dir, "test-node"), raise_server_exceptions=False)
    answer = app.post("/api/v1/submit-job", json={"config": JOB, "variables": {"tenant": TENANT}, "jobId": "j1"})
    assert answer.status_code == 200, answer.text
    app.store, app.submitted = store, answer.json()
    yield app
    store.dispose()


def _shown(client, paths) -> dict[str, list[str]]:
    answers = {path: client.get(path) for path in paths}
    assert all(a.status_code == 200 for a in answers.values()), {p: a.status_code for p, a in answers.items()}
    return {path: [x for x in (TENANT, ACCESS, SECRET) if x in a.text] for path, a in answers.items()}


def test_no_view_of_a_running_job_shows_its_env_secrets_or_secret_variable(client):
    assert client.submitted["jobName"] == "nightly-******"
    assert _shown(client, VIEWS) == {path: [] for path in VIEWS}
    env = client.get("/running-jobs").json()[0]["envOptions"]
    assert env["spark.hadoop.fs.s3a.secret.key"] == "******" and env["spark.hadoop.fs.s3a.access.key"] == "******"
    assert env["spark.executor.memory"] == "1g" and env["job.mode"] == "BATCH"      # ordinary options readable
    dag = client.get("/job-info/j1").json()["jobDag"]
    assert {"spark.executor.memory": "1g"} in dag["envOptions"]
    assert dag["vertexInfoMap"][0]["tablePaths"] == ["/data/******/in"]
    assert client.get("/api/v1/jobs").json()[0]["jobName"] == "nightly-******"


def test_a_job_recorded_before_the_fix_is_masked_on_the_way_out(client):
    with client.store.write() as conn:      # as a SeaTide before this one stored it: the name in clear
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(name=f"nightly-{TENANT}"))
    views = ["/api/v1/job-info/j1", "/api/v1/jobs/j1/plan", "/running-jobs", "/job-info/j1", "/running-job/j1"]
    assert _shown(client, views) == {path: [] for path in views}


def test_an_ended_jobs_seatunnel_views_mask_its_dag(client):
    with client.store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FAILED", finished_at=1.0,
                                                                           name=f"nightly-{TENANT}"))
    views = ["/finished-jobs/FAILED", "/job-info/j1"]
    assert _shown(client, views) == {path: [] for path in views}
    assert client.get("/finished-jobs/FAILED").json()[0]["jobDag"]["vertexInfoMap"][1]["tablePaths"] == [
        "/out/******"]


def test_a_slot_named_after_a_secret_variable_is_masked_in_job_infos_retained_holds(client):
    """review 8, F8: ``retained[].holds``, the slot as the leader measured it, showed the name in clear while the
    same name in ``leftBehind`` and the events was masked."""
    import time

    from sqlalchemy import insert
    with client.store.write() as conn:      # what coordinator/source_watch.py stores for a measured slot
        conn.execute(insert(s.source_holds).values(
            job_id="j1", pipeline_id=1, plugin_id="source[0]", incarnation=1, connector="Postgres-CDC",
            holds=f"st_{TENANT}", retained_bytes=1 << 30, lost=False, state="reserved", measured_at=time.time()))
    retained = client.get("/api/v1/job-info/j1").json()["retained"]
    assert [r["holds"] for r in retained] == ["st_******"]
