"""The operator's reads against a real job: its events, its driver's log, the nodes.

A real coordinator, worker and driver on SQLite (the reads are store-agnostic queries,
tested on the REST surface in tests/api/test_inspection.py).
"""

from __future__ import annotations

import os

import pytest

from seatide.testing.cluster import Cluster, http
from seatide.testing.jobs import batch_job
from tests.stores import sqlite_only

pytestmark = [pytest.mark.cluster, sqlite_only]


def test_a_finished_jobs_events_driver_log_and_the_nodes_read_from_any_coordinator(cluster: Cluster, tmp_path):
    c1 = cluster.coordinator("c1")
    cluster.worker("w1")
    cluster.submit(batch_job(str(tmp_path / "out"), rows=50, name="reads"), "reads-1")
    cluster.wait_status("reads-1", "FINISHED", timeout=240)
    c2 = cluster.coordinator("c2")     # not the leader: it answers the same from the store
    answers = []
    for url in (c1.url, c2.url):
        status, body = http("GET", url + "/api/v1/jobs/reads-1/events")
        assert status == 200, body
        kinds = [e["kind"] for e in body["events"]]
        assert kinds[0] == "JOB_SUBMITTED" and kinds.index("JOB_RUNNING") < kinds.index("JOB_FINISHED")
        assert all(e["epoch"] == cluster.leader().epoch for e in body["events"] if e["actor"] == "coordinator:c1")
        answers.append(body["events"])
    assert answers[0] == answers[1][:len(answers[0])]    # the same log (a late event may have landed in between)

    (attempt,) = cluster.ended_attempts("reads-1")
    path = os.path.join(cluster.data_dir, "logs", "reads-1", f"attempt-{attempt.attempt_id}.log")
    with open(path, "rb") as handle:
        on_disk = handle.read()
    assert on_disk, "the driver wrote nothing to its log"
    status, tail = http("GET", c2.url + "/api/v1/jobs/reads-1/logs?tail=3")
    assert status == 200, tail
    assert (tail["attemptId"], tail["worker"], tail["attemptState"]) == (attempt.attempt_id, "w1", "SUCCEEDED")
    assert tail["text"].splitlines() == on_disk.decode(errors="replace").splitlines()[-3:]
    status, whole = http("GET", c2.url + f"/api/v1/jobs/reads-1/logs?offset=0&limit={len(on_disk) + 10}")
    assert whole["text"].encode() == on_disk and whole["nextOffset"] == len(on_disk) == whole["size"]

    status, nodes = http("GET", c2.url + "/api/v1/nodes")
    assert nodes["leader"]["nodeId"] == "c1" and nodes["leader"]["epoch"] == cluster.leader().epoch == nodes["epoch"]
    assert {(n["nodeId"], n["state"], n["leader"]) for n in nodes["coordinators"]} == {("c1", "ALIVE", True),
                                                                                      ("c2", "ALIVE", False)}
    assert [(n["nodeId"], n["state"], n["runningAttempts"]) for n in nodes["workers"]] == [("w1", "ALIVE", 0)]
