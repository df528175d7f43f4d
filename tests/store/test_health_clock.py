"""The REST API, the web UI and the CLI judge checkpoint health on the store's clock, as the
metrics do (issue 30, finding 17).

The store's clock is 10 minutes behind this host's: a private PostgreSQL whose
``clock_timestamp()`` is moved (``PrivatePostgres.clock_offset``, as tests/cluster/test_store_clock.py),
or an SQLite store on the simulation's store clock (``clock.use_store_clock``). A job that
checkpointed 5 s ago by the store's clock is HEALTHY to the metrics; every view must say
the same, and count the 5 s. Before, the views read this host's clock: CHECKPOINT_STALE,
605 s since the last checkpoint.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update

from seatide import clock
from seatide.store import schema as s
from seatide.store.checkpoint_views import checkpoint_report
from seatide.store.clock import read_store_now
from seatide.store.db import open_store
from seatide.store.views import job_info, job_rows
from seatide.testing.servers import PrivatePostgres
from tests.exposition import Scrape
from tests.store.test_store import _attempt, submit

BEHIND_S = 600.0


@pytest.fixture(params=["sqlite", "postgresql"])
def store_behind(request, tmp_path):
    if request.param == "sqlite":
        clock.use_store_clock(lambda: time.time() - BEHIND_S)
        store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
        yield store
        store.dispose()
        clock.use_store_clock(None)
        return
    server = PrivatePostgres(clock_offset=f"-{BEHIND_S:g}s").start()
    store = open_store(f"postgresql://postgres@127.0.0.1:{server.port}/postgres")
    try:
        yield store
    finally:
        store.dispose()
        server.stop()


def test_every_view_reports_the_health_the_metrics_report_on_the_stores_clock(store_behind, tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from seatide.api.metrics import StoreCollector

    store = store_behind
    submit(store, tmp_path)
    _attempt(store, "j1")
    with store.write() as conn:
        now = read_store_now(conn)
        assert abs(time.time() - BEHIND_S - now) < 5, "the store's clock is not behind this host's"
        conn.execute(update(s.jobs).values(status="RUNNING", stale_after_s=30.0))
        conn.execute(update(s.pipelines).values(status="RUNNING", idle=False, started_at=now - 60,
                                                last_checkpoint_id=1, last_checkpoint_at=now - 5,
                                                last_checkpoint_duration_ms=1, last_checkpoint_rows=1,
                                                checkpoints_completed=1))
        conn.execute(s.checkpoints.insert().values(
            job_id="j1", incarnation=1, checkpoint_id=1, pipeline_id=1, batch_id=0, kind="CHECKPOINT",
            status="COMPLETED", created_at=now - 5, duration_ms=1, rows=1, fingerprint="f", attempt_id=1))
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, "c1"))
    metrics = Scrape.parse(generate_latest(registry).decode())
    assert metrics.value("seatide_job_checkpoint_health", job_id="j1", health="HEALTHY") == 1
    with store.read() as conn:
        seen = {"job_info": job_info(conn, "j1")["checkpoint"], "job_rows": job_rows(conn)[0]["checkpoint"],
                "checkpoint_report": checkpoint_report(conn, "j1")}
    for view, checkpoint in seen.items():
        assert checkpoint["health"] == "HEALTHY", (view, checkpoint["health"])
        assert 4 <= checkpoint["secondsSinceLastCheckpoint"] < 30, (view, checkpoint["secondsSinceLastCheckpoint"])
    assert 4 <= seen["checkpoint_report"]["pipelines"][0]["secondsSinceLastCheckpoint"] < 30
