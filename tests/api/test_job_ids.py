"""Job ids are names, not paths: hostile ids are refused before anything touches the disk."""

from __future__ import annotations

import os
import subprocess

import pytest
from fastapi.testclient import TestClient

from seatide.api.rest import create_app
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from tests.cli.test_local_run import ROOT, SEATIDE

JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""

HOSTILE = ["../../etc", "..", ".", "a/b", "/tmp/x", " ", "", "x" * 5000, "a\\b", "-rf", "a b", "é"]


@pytest.fixture
def client(tmp_path):
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    yield TestClient(create_app(store, data_dir, "test-node")), data_dir
    store.dispose()


@pytest.mark.parametrize("job_id", HOSTILE)
def test_rest_refuses_a_job_id_that_is_not_a_plain_name(client, job_id):
    http, data_dir = client
    response = http.post("/api/v1/submit-job", json={"config": JOB, "jobId": job_id})
    assert response.status_code == 400, response.text
    assert "is not allowed" in response.json()["error"]
    assert not os.path.exists(os.path.join(data_dir, "checkpoints")) or os.listdir(
        os.path.join(data_dir, "checkpoints")) == []


def test_rest_accepts_a_plain_name(client):
    http, data_dir = client
    response = http.post("/api/v1/submit-job", json={"config": JOB, "jobId": "orders-2026.11_a"})
    assert response.status_code == 200, response.text
    assert response.json()["jobId"] == "orders-2026.11_a"


def test_cli_refuses_a_hostile_job_id(tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB)
    result = subprocess.run([*SEATIDE, "run", str(conf), "--job-id", "../../outside", "--data-dir",
                             str(tmp_path / "d")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode != 0
    assert "job id '../../outside' is not allowed" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "outside").exists()
