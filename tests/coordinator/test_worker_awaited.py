"""A rolling upgrade's stall is said (second outside review of leasemove, M2): jobs wait PENDING while no live worker
heads the store's revision (reconcile.py ``choose_worker``), and nothing said so. The leader records one
``WORKER_AWAITED`` event per job and reason, logs a WARNING for them all at most once a minute
(coordinator/worker_wait.py), and ``/nodes`` shows what each node heads and whether it can take jobs.

The older worker's presence row is written as 0021's ``register_node`` wrote it (``recorded-environment``, no
store revision).
"""

from __future__ import annotations

import json
import logging

from sqlalchemy import and_, select

from seatide import intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.store import schema as s
from seatide.store.db import open_store
from seatide.store.migrations import HEAD
from seatide.store.views import nodes_report
from tests.store.test_recorded_environment_gate import JOB, register_as_older

REASON = f"no live worker heads store revision {HEAD} (w-0021 has: recorded-environment)"


def _awaited(store) -> list[tuple[str, str]]:
    e = s.events.c
    with store.read() as conn:
        rows = conn.execute(select(e.job_id, e.detail).where(e.kind == "WORKER_AWAITED").order_by(e.seq)).all()
    return [(row.job_id, json.loads(row.detail)["reason"]) for row in rows]


def _assigned(store) -> list[tuple[str, str]]:
    with store.read() as conn:
        return sorted(conn.execute(select(s.attempts.c.job_id, s.attempts.c.worker_id)).all())


def test_jobs_waiting_for_a_worker_of_the_stores_revision_are_said_once_and_the_nodes_show_why(
        store_url, tmp_path, caplog):
    store = open_store(store_url)
    leader = Coordinator(store, node_id="c1")
    try:
        register_as_older(store, "w-0021", "worker", slots=4, features="recorded-environment")
        for job_id in ("j1", "j2"):
            intents.submit(store, str(tmp_path), text=JOB, job_id=job_id, actor="test",
                           environment={"SEATIDE_GATE_NAME": "n"})
        assert leader.lease.tick()
        with caplog.at_level(logging.WARNING, logger="seatide.coordinator.worker_wait"):
            for _ in range(5):
                leader.reconcile_all()
        assert _assigned(store) == []
        assert _awaited(store) == [("j1", REASON), ("j2", REASON)]
        warnings = [r.getMessage() for r in caplog.records if r.name == "seatide.coordinator.worker_wait"]
        assert warnings == [f"2 jobs wait: {REASON}"], warnings

        with store.read() as conn:
            report = nodes_report(conn)
        assert report["storeRevision"] == HEAD
        (older,) = report["workers"]
        assert (older["features"], older["headsStoreRevision"], older["takesJobs"]) == (
            ["recorded-environment"], False, False)

        leader.lease.resign()                     # a new leader does not say it again
        other = Coordinator(store, node_id="c2")
        assert other.lease.tick()
        for _ in range(2):
            other.reconcile_all()
        assert _awaited(store) == [("j1", REASON), ("j2", REASON)]

        register_node(store, "w-new", "worker", slots=2)
        other.reconcile_all()
        assert _assigned(store) == [("j1", "w-new"), ("j2", "w-new")]
        with store.read() as conn:
            workers = {n["nodeId"]: n for n in nodes_report(conn)["workers"]}
        assert (workers["w-new"]["features"], workers["w-new"]["takesJobs"]) == (
            ["recorded-environment", f"store-{HEAD}"], True)
        other.lease.resign()
    finally:
        store.dispose()
