"""/metrics in-process: one registry per app, bounded store reads, route templates, a store outage.

Real apps on real SQLite stores; the figures of a running job are checked against real
processes in tests/cluster/test_metrics.py.
"""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from seatide.api.rest import create_app
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from tests.exposition import Scrape

JOB = """
env { job.mode = BATCH }
source { FakeSource { plugin_output = "a", row.num = 3, schema = { fields { id = bigint } } }
         FakeSource { plugin_output = "b", row.num = 3, schema = { fields { id = bigint } } } }
sink { Console { plugin_input = "a" }
       Console { plugin_input = "b" } }
"""


@pytest.fixture
def app_on(tmp_path):
    """``app_on(name)``: a client of a new app on its own new store, and the store."""
    made = []

    def make(name: str = "store", node_id: str = "node-1"):
        data_dir = str(tmp_path / name)
        os.makedirs(data_dir, exist_ok=True)
        store = open_store(default_store_url(data_dir))
        made.append(store)
        return TestClient(create_app(store, data_dir, node_id)), store

    yield make
    for store in made:
        store.dispose()


def scrape(client) -> Scrape:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return Scrape.parse(response.text)


def submit(client, job_id: str) -> None:
    response = client.post("/api/v1/submit-job", json={"config": JOB, "jobId": job_id})
    assert response.status_code == 200, response.text


def test_jobs_are_counted_by_every_status_with_zeros(app_on):
    client, _ = app_on()
    submit(client, "metrics-a")
    submit(client, "metrics-b")
    got = scrape(client)
    assert got.value("seatide_jobs", status="CREATED") == 2
    for status in ("PENDING", "RUNNING", "FINISHED", "FAILED", "CANCELED", "SAVEPOINT_DONE"):
        assert got.value("seatide_jobs", status=status) == 0
    assert got.value("seatide_pipeline_rows_read_total", job_id="metrics-a", pipeline=2) == 0
    assert got.value("seatide_job_attempts_total", job_id="metrics-b") == 0
    assert got.value("seatide_store_up") == 1


def _queries_per_scrape(client, store) -> int:
    statements = []
    listener = lambda *args: statements.append(args[2])   # noqa: E731 (before_cursor_execute's statement)
    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        scrape(client)
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)
    return len([s for s in statements if s.lstrip().upper().startswith("SELECT")])


def test_a_scrape_reads_the_store_in_as_many_queries_for_twenty_jobs_as_for_one(app_on):
    one, one_store = app_on("one")
    many, many_store = app_on("many")
    submit(one, "metrics-only")
    for n in range(20):
        submit(many, f"metrics-{n}")
    with_one, with_many = _queries_per_scrape(one, one_store), _queries_per_scrape(many, many_store)
    assert with_one == with_many, f"{with_one} queries for one job, {with_many} for twenty"
    assert with_one <= 8, with_one
    assert len(scrape(many).having("seatide_pipeline_rows_written_total")) == 40


def test_api_latency_is_labelled_by_route_template_and_status(app_on):
    client, _ = app_on()
    assert client.get("/api/v1/job-info/no-such-job").status_code == 404
    assert client.get("/api/v1/job-info/another-missing-job").status_code == 404
    assert client.get("/api/v1/overview").status_code == 200
    assert client.get("/no/such/page").status_code == 404
    got = scrape(client)
    count = "seatide_api_request_seconds_count"
    assert got.value(count, method="GET", route="/api/v1/job-info/{job_id}", status=404) == 2
    assert got.value(count, method="GET", route="/api/v1/overview", status=200) == 1
    assert got.value(count, method="GET", route="unmatched", status=404) == 1
    assert not [labels for labels in got.having(count) if "no-such-job" in labels["route"]]
    assert got.having("seatide_api_request_seconds_bucket", route="/api/v1/overview", le="+Inf")


def test_two_apps_in_one_process_keep_their_own_series(app_on):
    first, _ = app_on("first", node_id="node-a")
    second, _ = app_on("second", node_id="node-b")
    first.get("/api/v1/overview")
    first.get("/api/v1/overview")
    second.get("/api/v1/overview")
    route = dict(method="GET", route="/api/v1/overview", status=200)
    assert scrape(first).value("seatide_api_request_seconds_count", **route) == 2
    assert scrape(second).value("seatide_api_request_seconds_count", **route) == 1
    # Not the leader (no coordinator runs here), and no reconcile pass observed.
    assert scrape(second).value("seatide_is_leader") == 0
    assert scrape(second).value("seatide_reconcile_tick_seconds_count") == 0


def test_a_store_that_fails_is_reported_in_the_scrape_not_as_a_500(app_on):
    client, store = app_on()
    submit(client, "metrics-broken")
    with store.write() as conn:
        conn.execute(text("DROP TABLE attempts"))       # a table every scrape reads
    client.get("/api/v1/overview")
    got = scrape(client)
    assert got.value("seatide_store_up") == 0
    assert "seatide_jobs" not in got.names
    assert got.value("seatide_api_request_seconds_count", route="/api/v1/overview") == 1
