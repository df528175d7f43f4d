"""Reads for operators and the web UI: events, driver logs, plan and config, nodes.

In-process REST on a real SQLite store; jobs are submitted through the API, attempts and
node facts are written the way the leader and workers write them.
"""

from __future__ import annotations

import os
import time

import pytest
from sqlalchemy import insert, update

from seatide.coordinator.service import node_heartbeat, register_node
from seatide.store import schema as s
from seatide.store.events import record_event
from seatide.store.migrations import HEAD
from seatide.store.node_features import FEATURES
from seatide.store.paths import driver_log_path
from tests.leader import elected
from tests.security.test_rest_guards import JOB as SIMPLE, app_on  # noqa: F401  (app_on: the fixture)

TWO_PIPELINES = """
env { job.mode = BATCH, job.name = "two-pipelines" }
source {
  FakeSource { plugin_output = "a", row.num = 3, schema = { fields { id = bigint } } }
  FakeSource { plugin_output = "b", row.num = 3, schema = { fields { id = bigint } } }
}
transform {
  Sql { plugin_input = "a", plugin_output = "a2", query = "select id + 1 as id from a" }
}
sink {
  Console { plugin_input = "a2" }
  Jdbc {
    plugin_input = "b"
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    password = "hunter2"
    table = "web_ui_never_written"
  }
}
"""

@pytest.fixture
def api(app_on):
    """(client, store, data dir): in-process REST on a fresh SQLite store."""
    return app_on(), app_on.store, app_on.data_dir


def _submit(http, job_id: str, config: str = SIMPLE) -> None:
    response = http.post("/api/v1/submit-job", json={"config": config, "jobId": job_id})
    assert response.status_code == 200, response.text


def _attempt(store, job_id: str, number: int, worker: str = "w1", state: str = "RUNNING") -> int:
    """An attempt row as the leader creates it (and makes it the job's current one)."""
    with store.write() as conn:
        attempt_id = conn.execute(insert(s.attempts).values(
            job_id=job_id, incarnation=1, number=number, worker_id=worker, state=state,
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job_id).values(current_attempt=attempt_id))
    return attempt_id


def _write_log(data_dir: str, job_id: str, attempt_id: int, lines: int) -> bytes:
    path = driver_log_path(data_dir, job_id, attempt_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = "".join(f"line {i} of attempt {attempt_id} é\n" for i in range(lines)).encode()
    with open(path, "wb") as handle:
        handle.write(data)
    return data


# -- events ------------------------------------------------------------------------------
def test_events_are_the_jobs_log_oldest_first_paged_by_seq(api):
    http, _, _ = api
    _submit(http, "ev-1")
    _submit(http, "ev-other")
    assert http.post("/api/v1/stop-job", json={"jobId": "ev-1"}).status_code == 200

    body = http.get("/api/v1/jobs/ev-1/events").json()
    assert [e["kind"] for e in body["events"]] == ["JOB_SUBMITTED", "STOP_REQUESTED"]
    first, second = body["events"]
    assert first["seq"] < second["seq"] and first["actor"] == "api:test-node"
    assert first["detail"]["pipelines"] == 1 and second["detail"] == {"savepoint": False, "release": False}
    assert body["nextAfter"] == second["seq"] and body["more"] is False

    page = http.get("/api/v1/jobs/ev-1/events", params={"limit": 1}).json()
    assert [e["kind"] for e in page["events"]] == ["JOB_SUBMITTED"] and page["more"] is True
    rest = http.get("/api/v1/jobs/ev-1/events", params={"after": page["nextAfter"]}).json()
    assert [e["kind"] for e in rest["events"]] == ["STOP_REQUESTED"]
    done = http.get("/api/v1/jobs/ev-1/events", params={"after": rest["nextAfter"]}).json()
    assert done["events"] == [] and done["nextAfter"] == rest["nextAfter"]


def test_an_earlier_runs_left_held_event_is_masked_with_that_runs_secrets(api):
    """The events API shows what an earlier run of a resubmitted job id left held (RELEASE_LEFT_HELD); written
    unmasked by an older writer, it was masked with the current config's secrets alone, and the earlier run's
    password, a plain value by no credential-named key, was shown. The left-behind view masked it."""
    http, store, _ = api
    old_password, new_password = "old-Secret-9876", "new-Secret-5432"
    _submit(http, "j1", TWO_PIPELINES.replace("hunter2", new_password))
    with store.write() as conn:      # the earlier run's result (its config kept) and its release's event
        conn.execute(s.job_results.insert().values(
            job_id="j1", incarnation=7, run_id="run-before", config=TWO_PIPELINES.replace("hunter2", old_password),
            variables="{}", status="FAILED", cleanup="CLEAN", cleanup_due_at=0.0, cleanup_tries=0,
            next_cleanup_at=0.0, expires_at=0.0, created_at=0.0))
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", 7, None, run_id="run-before",
                     source="source[0]", connector="Postgres-CDC", holds="old_slot",
                     why=f"asked with password {old_password} and {new_password}", settle="drop it")
    response = http.get("/api/v1/jobs/j1/events")
    assert response.status_code == 200, response.text
    [left] = [e for e in response.json()["events"] if e["kind"] == "RELEASE_LEFT_HELD"]
    assert old_password not in response.text and new_password not in response.text, response.text
    assert left["run"] == "run-before" and left["detail"]["why"].startswith("asked with password "), left
    assert left["detail"]["holds"] == "old_slot", left


def test_events_of_an_unknown_job_are_404_and_a_bad_id_or_paging_is_4xx(api):
    http, _, _ = api
    response = http.get("/api/v1/jobs/nope/events")
    assert response.status_code == 404 and response.json() == {"error": "no job with id nope"}
    for bad in ("a b", "-rf", "x" * 200, "%2E%2E"):
        response = http.get(f"/api/v1/jobs/{bad}/events")
        assert response.status_code == 400, (bad, response.text)
        assert "is not allowed" in response.json()["error"]
    assert http.get("/api/v1/jobs/nope/events", params={"limit": 0}).status_code == 422
    assert http.get("/api/v1/jobs/nope/events", params={"after": -1}).status_code == 422
    assert http.get("/api/v1/jobs/nope/events", params={"after": 2**64}).status_code == 422
    assert http.get("/api/v1/jobs/nope/logs", params={"attempt": 2**64}).status_code == 422


# -- driver logs -------------------------------------------------------------------------
def test_log_tail_is_the_current_attempts_last_lines(api):
    http, store, data_dir = api
    _submit(http, "log-1")
    old = _attempt(store, "log-1", 1, state="FAILED")
    _write_log(data_dir, "log-1", old, 5)
    current = _attempt(store, "log-1", 2)
    data = _write_log(data_dir, "log-1", current, 500)

    body = http.get("/api/v1/jobs/log-1/logs", params={"tail": 10}).json()
    assert body["attemptId"] == current and body["worker"] == "w1" and body["attemptState"] == "RUNNING"
    assert body["text"].splitlines() == [f"line {i} of attempt {current} é" for i in range(490, 500)]
    assert body["size"] == len(data) == body["nextOffset"]
    assert body["offset"] == len(data) - len("".join(f"line {i} of attempt {current} é\n"
                                                   for i in range(490, 500)).encode())
    default = http.get("/api/v1/jobs/log-1/logs").json()
    assert len(default["text"].splitlines()) == 200

    older = http.get("/api/v1/jobs/log-1/logs", params={"attempt": old}).json()
    assert older["attemptId"] == old and older["attemptState"] == "FAILED"
    assert older["text"].splitlines()[-1] == f"line 4 of attempt {old} é"


def test_log_pages_by_byte_offset_add_up_to_the_file(api):
    http, store, data_dir = api
    _submit(http, "log-2")
    attempt = _attempt(store, "log-2", 1)
    data = _write_log(data_dir, "log-2", attempt, 300)
    pieces, offset = [], 0
    while True:
        page = http.get("/api/v1/jobs/log-2/logs", params={"offset": offset, "limit": 1000}).json()
        assert page["offset"] == offset
        if page["nextOffset"] == offset:
            break
        pieces.append(page["text"])
        offset = page["nextOffset"]
    assert len(pieces) == -(-len(data) // 1000)
    # A page may end inside a multi-byte character; the bytes, not each page's text, add up.
    assert offset == len(data)
    whole = http.get("/api/v1/jobs/log-2/logs", params={"offset": 0, "limit": len(data)}).json()
    assert whole["text"].encode() == data


def test_log_refusals_say_what_is_missing(api):
    http, store, data_dir = api
    _submit(http, "log-3")
    response = http.get("/api/v1/jobs/log-3/logs")
    assert response.status_code == 404 and "has no attempt yet" in response.json()["error"]

    attempt = _attempt(store, "log-3", 1, worker="w9")
    response = http.get("/api/v1/jobs/log-3/logs")
    assert response.status_code == 404
    assert f"no driver log for attempt {attempt} of job log-3" in response.json()["error"]
    assert "worker w9" in response.json()["error"]

    _submit(http, "log-4")
    others = _attempt(store, "log-4", 1)
    _write_log(data_dir, "log-4", others, 3)
    response = http.get("/api/v1/jobs/log-3/logs", params={"attempt": others})
    assert response.status_code == 404 and f"has no attempt {others}" in response.json()["error"]

    response = http.get("/api/v1/jobs/log-4/logs", params={"tail": 5, "offset": 0})
    assert response.status_code == 400 and "not both" in response.json()["error"]
    for bad in ("a b", "%2E%2E", "-x", "x" * 129):
        response = http.get(f"/api/v1/jobs/{bad}/logs")
        assert response.status_code == 400, (bad, response.text)


# -- plan and config ---------------------------------------------------------------------
def test_plan_groups_plugins_by_pipeline(api):
    http, _, _ = api
    _submit(http, "plan-1", TWO_PIPELINES)
    body = http.get("/api/v1/jobs/plan-1/plan").json()
    assert body["error"] is None and body["jobName"] == "two-pipelines" and body["mode"] == "BATCH"
    shape = [[(p["id"], p["name"], p["inputs"]) for p in pipe["plugins"]] for pipe in body["pipelines"]]
    assert shape == [
        [("source[0]", "FakeSource", []), ("transform[0]", "Sql", ["source[0]"]), ("sink[0]", "Console", ["transform[0]"])],
        [("source[1]", "FakeSource", []), ("sink[1]", "Jdbc", ["source[1]"])],
    ]
    assert body["pipelines"][1]["plugins"][1]["line"] == 12   # the line of "Jdbc {"
    config = http.get("/api/v1/job-info/plan-1").json()["config"]    # what the UI shows beside the DAG
    assert "hunter2" not in config and 'user = "postgres"' in config
    assert http.get("/api/v1/jobs/none-such/plan").status_code == 404


# -- nodes -------------------------------------------------------------------------------
def test_nodes_show_heartbeats_the_leader_and_its_epoch(api):
    http, store, _ = api
    register_node(store, "c1", "coordinator", url="http://c1:8080")
    register_node(store, "c2", "coordinator", url="http://c2:8080")
    register_node(store, "w1", "worker", slots=2)
    register_node(store, "w2", "worker", slots=1)
    node_heartbeat(store, "c2", stopped=True)
    with store.write() as conn:
        conn.execute(update(s.nodes).where(s.nodes.c.node_id == "w2").values(heartbeat_at=time.time() - 60))
    lease = elected(store, "c1", "http://c1:8080")
    _submit(http, "nodes-1")
    _attempt(store, "nodes-1", 1, worker="w1")

    body = http.get("/api/v1/nodes").json()
    assert body["leader"]["nodeId"] == "c1" and body["leader"]["epoch"] == body["epoch"] >= 1
    assert body["leader"]["leaseExpiresInSeconds"] > 0
    coordinators = {n["nodeId"]: n for n in body["coordinators"]}
    workers = {n["nodeId"]: n for n in body["workers"]}
    assert (coordinators["c1"]["state"], coordinators["c1"]["leader"]) == ("ALIVE", True)
    assert (coordinators["c2"]["state"], coordinators["c2"]["leader"]) == ("STOPPED", False)
    assert workers["w1"]["state"] == "ALIVE" and workers["w1"]["runningAttempts"] == 1 and workers["w1"]["slots"] == 2
    assert workers["w2"]["state"] == "SILENT" and workers["w2"]["secondsSinceHeartbeat"] >= 60
    # What each node's SeaTide heads, and whether a worker can take jobs (ALIVE and heading the store's revision).
    assert body["storeRevision"] == HEAD and coordinators["c1"]["features"] == FEATURES.split(",")
    assert (workers["w1"]["headsStoreRevision"], workers["w1"]["takesJobs"]) == (True, True)
    assert (workers["w2"]["headsStoreRevision"], workers["w2"]["takesJobs"]) == (True, False)

    lease.resign()
    body = http.get("/api/v1/nodes").json()
    assert body["leader"] is None and body["epoch"] >= 1


# -- what the jobs list and the detail page show ----------------------------------------
def test_job_rows_and_info_carry_rows_duration_rate_and_attempts(api):
    http, store, _ = api
    _submit(http, "rows-1")
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "rows-1").values(rows_read=120, rows_written=100))
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "rows-1").values(created_at=time.time() - 10))
    first = _attempt(store, "rows-1", 1, state="LOST")
    second = _attempt(store, "rows-1", 2, worker="w2")

    (row,) = http.get("/api/v1/running-jobs").json()
    assert (row["rowsRead"], row["rowsWritten"]) == (120, 100)
    assert 10 <= row["durationSeconds"] < 20 and 5 < row["rowsPerSecond"] <= 10

    info = http.get("/api/v1/job-info/rows-1").json()
    assert [(a["attemptId"], a["worker"], a["state"]) for a in info["attempts"]] == [
        (first, "w1", "LOST"), (second, "w2", "RUNNING")]
    assert info["rowsWritten"] == 100 and info["currentAttempt"]["attemptId"] == second


def test_the_ui_page_and_its_assets_are_served(api):
    http, _, _ = api
    page = http.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<script src="/ui/app.js"' in page.text
    for asset in ("/ui/app.js", "/ui/style.css"):
        assert http.get(asset).status_code == 200, asset
    assert http.get("/ui/../rest.py").status_code == 404


def test_the_ui_files_load_without_the_token_even_when_reads_need_it(app_on):
    http = app_on(api_token="ui-token", auth_reads=True)
    assert http.get("/").status_code == 200 and http.get("/ui/app.js").status_code == 200
    assert http.get("/api/v1/nodes").status_code == 401     # the data still needs it
    assert http.get("/api/v1/nodes", headers={"Authorization": "Bearer ui-token"}).status_code == 200
