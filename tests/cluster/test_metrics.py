"""/metrics of real coordinators while a checkpointed job is held mid-way, and after it ends.

One run (SQLite, two coordinators, one worker, one driver) is recorded by a module fixture;
each test checks one behaviour against the scrapes it took. The Grafana dashboard test
checks every series the dashboard queries against the mid-way scrape of that real run.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from dataclasses import dataclass

import pytest

from seatide.testing.cluster import Cluster, batch_gate, http, open_gate, wait_for
from seatide.testing.jobs import batch_job
from tests.cluster.prometheus import Prometheus
from tests.exposition import Scrape

pytestmark = pytest.mark.cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB_ID = "metrics-held"
# A batch before the hold and one after the gate opens (were three and two: a second each): the
# held scrapes need the job's series to exist and stand still, the finished one a batch past them.
ROWS, PER_BATCH, PASSES = 200, 100, 1
# Series only the process that serves them can know: they differ between coordinators.
PROCESS_LOCAL = ("seatide_is_leader", "seatide_checkpoint_age_seconds", "seatide_reconcile_tick_seconds",
                 "seatide_api_request_seconds")


def scrape(url: str) -> Scrape:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert response.status == 200
        return Scrape.parse(response.read().decode())


@dataclass
class Run:
    held: Scrape            # the job held after PASSES committed batches
    held_later: Scrape      # the same, once its checkpoint age has grown
    held_info: dict         # job-info at the time of ``held``
    other_held: Scrape      # the non-leading coordinator's scrape of the held job
    finished: Scrape        # after the gate opened and the job finished
    finished_info: dict
    epoch: int
    dashboard: dict[str, list]    # each dashboard query, as a real Prometheus answered it mid-way
    rows_series: list[dict]       # seatide_job_rows_read_total's label sets, as Prometheus stored them


def _age(got: Scrape) -> float:
    return got.value("seatide_checkpoint_age_seconds", job_id=JOB_ID, pipeline=1)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    tmp = tmp_path_factory.mktemp("metrics")
    cluster = Cluster(f"sqlite:///{tmp}/state.db", str(tmp / "data"))
    gate = str(tmp / "gate")
    prometheus = None
    try:
        leader = cluster.coordinator("c1")
        cluster.leader_proc()
        other = cluster.coordinator("c2")
        prometheus = Prometheus(str(tmp / "prometheus"), [p.url.split("//")[1] for p in (leader, other)])
        cluster.worker("w1", env=batch_gate(gate, passes=PASSES))
        cluster.submit(batch_job(str(tmp / "out"), rows=ROWS, rows_per_batch=PER_BATCH), JOB_ID)
        # Rows read are reported from Spark's progress events, a little after the commit: wait for both.
        wait_for(lambda: min(cluster.job_info(JOB_ID)["metrics"].values()) >= PASSES * PER_BATCH, 180,
                 message=f"{PASSES} batches read and committed")
        held_info = cluster.job_info(JOB_ID)
        held = scrape(leader.url)
        other_held = scrape(other.url)
        age = _age(held)
        held_later = wait_for(lambda: (lambda later: later if _age(later) >= age + 1.0 else None)(scrape(leader.url)),
                              30, message="the checkpoint age to grow by a second")
        # rate() needs two samples of the running job's series from each coordinator.
        wait_for(lambda: len(prometheus.query("count_over_time(seatide_checkpoint_age_seconds[1m]) >= 2")) == 2,
                 30, message="prometheus to scrape both coordinators twice")
        dashboard = {query: prometheus.query(grafana_to_promql(query)) for query in dashboard_queries()}
        rows_series = [series["metric"] for series in prometheus.query("seatide_job_rows_read_total")]
        assert cluster.job_info(JOB_ID)["checkpoint"]["lastCheckpointId"] == held_info["checkpoint"]["lastCheckpointId"]
        open_gate(gate)
        cluster.wait_status(JOB_ID, "FINISHED", timeout=180)
        yield Run(held, held_later, held_info, other_held, scrape(leader.url), cluster.job_info(JOB_ID),
                  cluster.leader().epoch, dashboard, rows_series)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        if prometheus is not None:
            prometheus.stop()
        cluster.stop_all()


def test_checkpoint_age_grows_while_the_job_is_held_mid_way(run: Run):
    assert _age(run.held) is not None and _age(run.held_later) >= _age(run.held) + 1.0
    assert run.held.value("seatide_job_checkpoint_health", job_id=JOB_ID, health="HEALTHY") == 1
    assert run.held.value("seatide_job_checkpoint_health", job_id=JOB_ID, health="CHECKPOINT_STALE") == 0


def test_row_and_checkpoint_counters_match_job_info(run: Run):
    for got, info in ((run.held, run.held_info), (run.finished, run.finished_info)):
        for pipeline in info["pipelines"]:
            at = dict(job_id=JOB_ID, job_name="batch", pipeline=pipeline["pipelineId"])
            assert got.value("seatide_pipeline_rows_read_total", **at) == pipeline["rowsRead"]
            assert got.value("seatide_pipeline_rows_written_total", **at) == pipeline["rowsWritten"]
        assert got.value("seatide_job_rows_read_total", job_id=JOB_ID) == info["metrics"]["SourceReceivedCount"]
        assert got.value("seatide_job_rows_written_total", job_id=JOB_ID) == info["metrics"]["SinkWriteCount"]
        checkpoint = info["checkpoint"]
        assert got.value("seatide_job_checkpoints_completed_total", job_id=JOB_ID) == checkpoint["completed"]
        assert got.value("seatide_checkpoints_completed_total", job_id=JOB_ID, pipeline=1) == checkpoint["completed"]
        assert got.value("seatide_checkpoints_failed_total", job_id=JOB_ID, pipeline=1) == checkpoint["failed"] == 0
        assert got.value("seatide_checkpoint_last_duration_seconds", job_id=JOB_ID, pipeline=1) == pytest.approx(
            checkpoint["lastCheckpointDurationMs"] / 1000)
        assert got.value("seatide_job_attempts_total", job_id=JOB_ID) == 1
        assert got.value("seatide_job_restarts_total", job_id=JOB_ID) == 0
    assert run.held_info["metrics"]["SinkWriteCount"] == PASSES * PER_BATCH
    assert run.finished.value("seatide_job_rows_written_total", job_id=JOB_ID) == ROWS


def test_status_counts_change_when_the_job_finishes(run: Run):
    assert run.held.value("seatide_jobs", status="RUNNING") == 1
    assert run.held.value("seatide_jobs", status="FINISHED") == 0
    assert run.finished.value("seatide_jobs", status="RUNNING") == 0
    assert run.finished.value("seatide_jobs", status="FINISHED") == 1
    # Age and health describe running jobs only.
    assert run.finished.having("seatide_checkpoint_age_seconds", job_id=JOB_ID) == []
    assert run.finished.having("seatide_job_checkpoint_health", job_id=JOB_ID) == []


def test_leader_series_and_each_coordinators_own_histograms(run: Run):
    assert run.held.value("seatide_leader_epoch") == run.epoch
    # Epochs start at 0 and each election raises it by one and writes one event.
    assert run.held.value("seatide_leader_changes_total") == run.epoch >= 1
    leading, other = (run.held, run.other_held) if run.held.value("seatide_is_leader") else (run.other_held, run.held)
    assert (leading.value("seatide_is_leader"), other.value("seatide_is_leader")) == (1, 0)
    assert leading.value("seatide_reconcile_tick_seconds_count") > 0
    assert run.finished.value("seatide_reconcile_tick_seconds_count") > run.held.value(
        "seatide_reconcile_tick_seconds_count")
    assert run.held.value("seatide_api_request_seconds_count", method="GET",
                          route="/api/v1/job-info/{job_id}", status=200) >= 1


def test_every_coordinator_reports_the_same_store_facts(run: Run):
    def store_facts(got: Scrape) -> dict:
        return {key: value for key, value in got.samples.items() if not key[0].startswith(PROCESS_LOCAL)}

    assert store_facts(run.held) == store_facts(run.other_held)
    assert len(store_facts(run.held)) > 20


# -- the Grafana dashboard ------------------------------------------------------------
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, labels or keywords."""
    expr = re.sub(r'"(?:\\.|[^"\\])*"', "", expr)                       # strings
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)                      # label matchers, ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)   # label lists
    expr = re.sub(r"\$\w+", "", expr)                                     # Grafana variables
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        following = expr[match.end():].lstrip()[:1]
        if following != "(" and match.group() not in PROMQL_WORDS:
            names.add(match.group())
    return names


def dashboard_queries() -> list[str]:
    with open(os.path.join(ROOT, "deploy", "grafana", "seatide.json")) as handle:
        dashboard = json.load(handle)
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            query = query["query"] if isinstance(query, dict) else query
            # Grafana's label_values(SELECTOR, LABEL): the selector is PromQL, the label is not.
            values = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query)
            queries.append(values.group(1) if values else query)
    return queries


def grafana_to_promql(expr: str) -> str:
    """The dashboard's variables as Grafana fills them: all jobs, a rate window of four scrapes."""
    expr = expr.replace("$__rate_interval", "4s").replace("$job_id", ".*")
    assert "$" not in expr, f"a Grafana variable this test does not fill: {expr}"
    return expr


def test_promql_metric_names_are_found_and_functions_labels_are_not():
    assert promql_metric_names(
        'histogram_quantile(0.99, sum by (le, route) (rate(seatide_api_request_seconds_bucket{job_id=~"$job_id"}'
        '[$__rate_interval]))) / on (route) group_left up') == {"seatide_api_request_seconds_bucket", "up"}
    assert promql_metric_names("max(increase(seatide_leader_changes_total[24h])) > 2") == {
        "seatide_leader_changes_total"}


def test_every_series_the_grafana_dashboard_queries_exists_in_a_real_scrape(run: Run):
    queries = dashboard_queries()
    used = set().union(*(promql_metric_names(query) for query in queries))
    assert {"seatide_jobs", "seatide_checkpoint_age_seconds", "seatide_reconcile_tick_seconds_bucket",
            "seatide_api_request_seconds_bucket"} <= used
    missing = used - run.held.names
    assert not missing, f"the dashboard queries series that /metrics does not serve: {sorted(missing)}"


def test_every_series_served_is_documented(run: Run):
    with open(os.path.join(ROOT, "docs", "metrics.md")) as handle:
        doc = handle.read()
    undocumented = {name for name in run.held.families if f"`{name}" not in doc}
    assert not undocumented, f"series missing from docs/metrics.md: {sorted(undocumented)}"
    assert all(help_text for _type, help_text in run.held.families.values())


def test_every_query_of_the_grafana_dashboard_returns_data_from_a_real_prometheus(run: Run):
    empty = [query for query, result in run.dashboard.items() if not result]
    assert not empty, f"dashboard queries with no data while a job ran: {empty}"
    assert len(run.dashboard) >= 20


def test_the_job_id_label_survives_prometheus_own_job_label(run: Run):
    assert len(run.rows_series) == 2      # one per coordinator
    for labels in run.rows_series:
        assert labels["job"] == "seatide" and labels["job_id"] == JOB_ID and "exported_job" not in labels
