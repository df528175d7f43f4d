"""The reviewer's story, end to end: pipeline 1 FINISHED, pipeline 2 held, the job cancelled and
resumed under ``--fallback fresh`` with the same job in SeaTunnel's JSON form, its options shaded
(``seatunnel --encrypt``'s output). Nothing changed: no pipeline is named as started over,
pipeline 1 stays FINISHED and its exactly-once sink holds each row once
(it held every row twice: ``rows: 200 distinct: 100 max count: 2``)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from seatide.config.loader import job_as_json
from seatide.config.shade import encrypt_config
from seatide.store import schema as s
from seatide.testing.cluster import Cluster, http, open_gate, wait_for
from seatide.testing.jobs import assert_exactly, batch_job, written_ids

pytestmark = pytest.mark.cluster


def _status(cluster: Cluster, job_id: str, pipeline: int) -> str | None:
    job = cluster.job(job_id)
    with cluster.store.read() as conn:
        return conn.execute(select(s.pipelines.c.status).where(
            s.pipelines.c.job_id == job_id, s.pipelines.c.incarnation == job.incarnation,
            s.pipelines.c.pipeline_id == pipeline)).scalar()


# In the soak set (bash scripts/test -m soak): two drivers of CI time for a decision CI already sees
# through tests/store/test_respelled_job.py (the resume's plan from the JSON and shaded forms)
@pytest.mark.soak
def test_a_finished_pipeline_resumed_from_the_encrypted_json_form_is_not_run_again(shared_cluster: Cluster, tmp_path):
    cluster, out, gate = shared_cluster, str(tmp_path / "out"), str(tmp_path / "gate")
    text = batch_job(out, rows=100, pipelines=2, rows_per_batch=50)
    cluster.arm("respelled", f"driver.batch_start@2=gate:0:{gate}")     # pipeline 2 held at its first batch
    cluster.submit(text, "respelled")
    wait_for(lambda: _status(cluster, "respelled", 1) == "FINISHED", 300, message="pipeline 1 FINISHED")
    cluster.cancel("respelled")
    cluster.wait_status("respelled", "CANCELED", timeout=120)
    assert_exactly(written_ids(out + "/p0"), range(100))
    tree = job_as_json(text)
    tree["env"]["shade"] = {"identifier": "base64", "options": ["split.num"]}
    for block in tree["source"]:
        block["split"]["num"] = str(block["split"]["num"])
    encrypted = json.dumps(encrypt_config(tree))
    assert '"num": "NA=="' in encrypted
    open_gate(gate)
    status, body = http("POST", cluster.any_coordinator().url + "/api/v1/jobs/respelled/resume",
                        {"config": encrypted, "fallback": "fresh"}, timeout=60)
    assert status == 200, body
    assert not [w for w in body["warnings"] if "starts over" in w], body
    assert _status(cluster, "respelled", 1) == "FINISHED"
    job = cluster.wait_status("respelled", {"FINISHED", "FAILED"}, timeout=300)
    assert job.status == "FINISHED", job.error_msg
    assert "RESTORE_FALLBACK_FRESH" not in [e.kind for e in cluster.events("respelled")]
    assert_exactly(written_ids(out + "/p0"), range(100))
    assert_exactly(written_ids(out + "/p1"), range(100, 200))
