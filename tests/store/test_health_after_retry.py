"""Every view of checkpoint health gives the leader's watchdog verdict while a retried attempt starts
(review 30, F6).

After a retry, the pipeline rows still carry the previous attempt's last checkpoint. The leader
counts a pipeline's silence from its last checkpoint or from the current attempt's pipeline start,
whichever is later, and judges nothing before this attempt has started its pipelines
(``coordinator/reconcile.py``). The views (REST, UI, CLI, the metrics) counted from the previous
attempt's checkpoint: CHECKPOINT_STALE for an attempt the leader rightly judged healthy.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from seatide.coordinator.reconcile import Snapshot, checkpoint_stale_for
from seatide.store import schema as s
from seatide.store.checkpoint_views import checkpoint_report
from seatide.store.clock import read_store_now
from seatide.store.views import job_info, job_rows
from tests.exposition import Scrape
from tests.store.test_store import _attempt, store, submit  # noqa: F401  (store is a fixture)

STALE_AFTER_S = 180.0


@pytest.mark.parametrize("started_s_ago, checkpoint_s_ago", [
    (10, 300),          # the retried attempt started its pipelines 10 s ago; the last checkpoint is its predecessor's
    (None, 300),        # the retried attempt has not started its pipelines yet (they show the last attempt's start)
    (200, 300),         # started 200 s ago and no checkpoint since: stale for both
])
def test_every_view_gives_the_leaders_verdict_after_a_retry(store, tmp_path, started_s_ago, checkpoint_s_ago):
    from prometheus_client import CollectorRegistry, generate_latest

    from seatide.api.metrics import StoreCollector

    submit(store, tmp_path)
    _attempt(store, "j1", number=1)
    attempt_id = _attempt(store, "j1", number=2)       # the retry
    with store.write() as conn:
        now = read_store_now(conn)
        launched = now - 20 if started_s_ago is None else now - started_s_ago - 5
        started = now - 400 if started_s_ago is None else now - started_s_ago   # None: the last attempt's start
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == attempt_id)
                     .values(launched_at=launched, created_at=launched))
        conn.execute(update(s.jobs).values(status="RUNNING", stale_after_s=STALE_AFTER_S))
        conn.execute(update(s.pipelines).values(status="RUNNING", idle=False, started_at=started,
                                                last_checkpoint_at=now - checkpoint_s_ago))
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
        attempt = conn.execute(select(s.attempts).where(s.attempts.c.attempt_id == attempt_id)).one()
        pipelines = conn.execute(select(s.pipelines)).all()
        leader = checkpoint_stale_for(Snapshot(job, attempt, pipelines, {}, now=read_store_now(conn)))
        seen = {"job_info": job_info(conn, "j1")["checkpoint"]["health"],
                "job_rows": job_rows(conn)[0]["checkpoint"]["health"],
                "checkpoint_report": checkpoint_report(conn, "j1")["health"]}
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, "c1"))
    metrics = Scrape.parse(generate_latest(registry).decode())
    seen["metrics"] = next(h for h in ("HEALTHY", "CHECKPOINT_STALE")
                           if metrics.value("seatide_job_checkpoint_health", job_id="j1", health=h) == 1)
    expected = "HEALTHY" if leader is None else "CHECKPOINT_STALE"
    assert seen == dict.fromkeys(seen, expected), f"the leader says {expected}: {seen}"
