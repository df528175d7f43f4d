"""Prometheus metrics of a coordinator, with prometheus_client.

Two kinds of series, for two kinds of fact:

* Store facts (jobs, rows, checkpoints, attempts, the lease) come from ``StoreCollector``,
  which reads the store when scraped. Every coordinator reports the same values, and a
  failover loses nothing, because nothing is counted in a process's memory.
* What only this process sees (how long its reconcile ticks and API requests take) are
  histograms it observes itself: ``seatide_reconcile_tick_seconds``, ``seatide_api_request_seconds``.

Each app has its own ``CollectorRegistry`` (never the global one), so several apps can live
in one process. Every series is documented in docs/metrics.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from sqlalchemy.exc import SQLAlchemyError

from seatide.store.clock import read_store_now
from seatide.store.db import Store
from seatide.store.states import JOB_TERMINAL, JOB_TRANSITIONS, PIPELINE_TERMINAL
from seatide.store.stats import JobStats, StoreStats, store_stats
from seatide.store.checkpoint_views import checkpoint_health

log = logging.getLogger(__name__)

HEALTH = ("HEALTHY", "IDLE", "CHECKPOINT_STALE", "HUNG")
# A reconcile pass or a read is usually milliseconds: finer low buckets than the library's default.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# ``job_id``, not ``job``: Prometheus gives every scraped series its own ``job`` label (the scrape
# job), and a series' own ``job`` would be renamed ``exported_job`` under the default honor_labels.
JOB = ("job_id", "job_name")
PIPELINE = ("job_id", "job_name", "pipeline")
CHECKPOINTS = ("job_id", "pipeline")
SOURCE = ("job_id", "job_name", "pipeline", "source", "connector")


@dataclass(frozen=True)
class Family:
    """One series read from the store: its name, type, help text and labels, declared once."""
    name: str
    kind: type
    help: str
    labels: tuple[str, ...] = ()

    def empty(self):
        return self.kind(self.name, self.help, labels=self.labels)


FAMILIES = {f.name: f for f in (
    Family("seatide_store_up", GaugeMetricFamily, "1 if the state store answered this scrape, else 0."),
    Family("seatide_jobs", GaugeMetricFamily, "Jobs in the store by status (every status, 0 included).",
           ("status",)),
    Family("seatide_pipeline_rows_read_total", CounterMetricFamily,
           "Rows read by a pipeline's sources in the job's current incarnation.", PIPELINE),
    Family("seatide_pipeline_rows_written_total", CounterMetricFamily,
           "Rows committed by a pipeline's sinks in the job's current incarnation.", PIPELINE),
    Family("seatide_job_rows_read_total", CounterMetricFamily,
           "Rows read by the job's sources in its current incarnation.", JOB),
    Family("seatide_job_rows_written_total", CounterMetricFamily,
           "Rows committed by the job's sinks in its current incarnation.", JOB),
    Family("seatide_checkpoint_age_seconds", GaugeMetricFamily,
           "Seconds since a running pipeline's last completed checkpoint.", CHECKPOINTS),
    Family("seatide_checkpoint_last_duration_seconds", GaugeMetricFamily,
           "How long a pipeline's last completed checkpoint took.", CHECKPOINTS),
    Family("seatide_checkpoints_completed_total", CounterMetricFamily,
           "Completed checkpoints of a pipeline.", CHECKPOINTS),
    Family("seatide_checkpoints_failed_total", CounterMetricFamily,
           "Checkpoints of a pipeline that failed or timed out.", CHECKPOINTS),
    Family("seatide_checkpoints_restored_total", CounterMetricFamily,
           "Starts of a pipeline from an existing checkpoint.", CHECKPOINTS),
    Family("seatide_job_checkpoints_completed_total", CounterMetricFamily,
           "Completed checkpoints of the job, all pipelines.", JOB),
    Family("seatide_job_checkpoints_failed_total", CounterMetricFamily,
           "Failed or timed-out checkpoints of the job, all pipelines.", JOB),
    Family("seatide_job_checkpoint_health", GaugeMetricFamily,
           "1 for a running job's checkpoint health (HEALTHY, IDLE, CHECKPOINT_STALE, HUNG), 0 for the others.",
           (*JOB, "health")),
    Family("seatide_job_attempts_total", CounterMetricFamily,
           "Attempts (driver runs) of the job's current incarnation.", ("job_id",)),
    Family("seatide_job_restarts_total", CounterMetricFamily,
           "Retries of the job's current incarnation after a failed or lost attempt.", ("job_id",)),
    Family("seatide_source_retained_bytes", GaugeMetricFamily,
           "What a CDC source holds on its server, as the leader last measured it: WAL its replication slot "
           "retains (Postgres-CDC), binlog bytes its position is behind (MySQL-CDC).", SOURCE),
    Family("seatide_source_retained_warning", GaugeMetricFamily,
           "1 while a CDC source is past the retained-size warning threshold or its position is lost, else 0.",
           SOURCE),
    Family("seatide_source_position_lost", GaugeMetricFamily,
           "1 when the server no longer has what the source needs to resume (slot wal_status lost, binlog "
           "file purged), else 0.", SOURCE),
    Family("seatide_source_retained_age_seconds", GaugeMetricFamily,
           "Seconds since the source's holdings were last measured (grows while its database does not answer).",
           SOURCE),
    Family("seatide_leader_epoch", GaugeMetricFamily, "The leader lease's epoch; it grows with each election."),
    Family("seatide_leader_changes_total", CounterMetricFamily,
           "Leader elections recorded in the store's event log."),
    Family("seatide_is_leader", GaugeMetricFamily, "1 if this coordinator holds an unexpired leader lease."),
)}


class StoreCollector:
    """Reads the store at scrape time (``store_stats``: a fixed number of grouped queries)."""

    def __init__(self, store: Store, node_id: str):
        self.store = store
        self.node_id = node_id

    def describe(self):
        # Names only: registering must not query the store.
        return [family.empty() for family in FAMILIES.values()]

    def collect(self):
        families = {name: family.empty() for name, family in FAMILIES.items()}
        try:
            with self.store.read() as conn:
                stats = store_stats(conn)
                now = read_store_now(conn)     # the lease is judged by the store's clock
        except SQLAlchemyError as exc:
            # A scrape during a store outage says so instead of failing: the histograms still count.
            log.warning("metrics: the store did not answer: %s", exc)
            families["seatide_store_up"].add_metric([], 0)
            return [families["seatide_store_up"]]
        families["seatide_store_up"].add_metric([], 1)
        _fill(families, stats, self.node_id, now)
        return list(families.values())


def _fill(families: dict, stats: StoreStats, node_id: str, now: float) -> None:
    def add(name: str, labels, value) -> None:
        families[name].add_metric([str(v) for v in labels], value)

    counts = {status: 0 for status in JOB_TRANSITIONS}
    for job_stats in stats.jobs:
        counts[job_stats.job.status] = counts.get(job_stats.job.status, 0) + 1
        _fill_job(add, job_stats, now)
    for status, count in counts.items():
        add("seatide_jobs", [status], count)
    for h in stats.holds:
        labels = (h.job_id, h.job_name, h.pipeline_id, h.plugin_id, h.connector)
        if h.retained_bytes is not None:
            add("seatide_source_retained_bytes", labels, h.retained_bytes)
        add("seatide_source_retained_warning", labels, 1 if h.warned_at is not None else 0)
        add("seatide_source_position_lost", labels, 1 if h.lost else 0)
        add("seatide_source_retained_age_seconds", labels, max(0.0, now - h.measured_at))
    lease = stats.lease
    add("seatide_leader_epoch", [], lease.epoch if lease else 0)
    add("seatide_leader_changes_total", [], stats.leader_changes)
    leading = lease is not None and lease.node_id == node_id and lease.expires_at >= now
    add("seatide_is_leader", [], 1 if leading else 0)


def _fill_job(add, job_stats: JobStats, now: float) -> None:
    job = job_stats.job
    live = job.status not in JOB_TERMINAL
    for p in job_stats.pipelines:
        row = p.row
        at = (job.job_id, row.pipeline_id)
        add("seatide_pipeline_rows_read_total", (job.job_id, job.name, row.pipeline_id), row.rows_read)
        add("seatide_pipeline_rows_written_total", (job.job_id, job.name, row.pipeline_id), row.rows_written)
        add("seatide_checkpoints_completed_total", at, p.completed)
        add("seatide_checkpoints_failed_total", at, p.failed)
        add("seatide_checkpoints_restored_total", at, row.restores)
        if p.latest is not None:
            add("seatide_checkpoint_last_duration_seconds", at, p.latest.duration_ms / 1000)
            if live and row.status not in PIPELINE_TERMINAL:    # a finished pipeline's age means nothing
                add("seatide_checkpoint_age_seconds", at, max(0.0, now - p.latest.created_at))
    names = (job.job_id, job.name)
    add("seatide_job_rows_read_total", names, sum(p.row.rows_read for p in job_stats.pipelines))
    add("seatide_job_rows_written_total", names, sum(p.row.rows_written for p in job_stats.pipelines))
    add("seatide_job_checkpoints_completed_total", names, sum(p.completed for p in job_stats.pipelines))
    add("seatide_job_checkpoints_failed_total", names, sum(p.failed for p in job_stats.pipelines))
    add("seatide_job_attempts_total", [job.job_id], job_stats.attempts)
    add("seatide_job_restarts_total", [job.job_id], job.retries_used)
    health = checkpoint_health(job, [p.row for p in job_stats.pipelines], now, job_stats.attempt)
    if health is not None:
        for verdict in HEALTH:
            add("seatide_job_checkpoint_health", (*names, verdict), 1 if health == verdict else 0)


class CoordinatorMetrics:
    """One coordinator's registry: the store collector and this process's own histograms."""

    def __init__(self, store: Store, node_id: str):
        self.registry = CollectorRegistry()
        self.registry.register(StoreCollector(store, node_id))
        self.reconcile_tick = Histogram(
            "seatide_reconcile_tick_seconds", "How long one reconcile pass of this coordinator took (leader only).",
            buckets=LATENCY_BUCKETS, registry=self.registry)
        self.api_request = Histogram(
            "seatide_api_request_seconds", "Latency of this coordinator's HTTP responses.",
            ("method", "route", "status"), buckets=LATENCY_BUCKETS, registry=self.registry)

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape body and its content type (OpenMetrics when the scraper asks for it)."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


class ResponseStatus:
    """An ASGI ``send`` that notes the status of the response it passes on (500 until one starts)."""

    def __init__(self, send):
        self.code = 500
        self._send = send

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.code = message["status"]
        await self._send(message)


class RequestTimer:
    """ASGI middleware: each HTTP request's latency by method, route template and status.

    The route is the template (``/api/v1/job-info/{job_id}``), never the raw path, so a
    scan of random URLs adds one series (``unmatched``), not one per URL.
    """

    def __init__(self, app, histogram: Histogram):
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began, status = time.perf_counter(), ResponseStatus(send)
        try:
            await self.app(scope, receive, status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.histogram.labels(scope["method"], route, str(status.code)).observe(time.perf_counter() - began)
