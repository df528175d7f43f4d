"""An event stays masked with its run's secrets once the config that held them is forgotten. Both stores.

Review 7, F1: an event written unmasked (by an older SeaTide, or a text with a bare secret value no key names,
"asked with password old-Secret-9876") was masked where shown with its incarnation's job result's config and
the job row's (``event_masking.run_secrets``); history expiry deletes those (an earlier incarnation's result
with the run going on, or the run's result and job row), and the event showed the password from then on. The
forgetting transaction now rewrites the events masked with the configs it deletes.
"""
from __future__ import annotations

import json

from sqlalchemy import select, update

from seatide.coordinator.cleanup import Forget, apply_cleanup
from seatide.store import schema as s
from seatide.store.events import record_event
from seatide.store.jobs import forget_job
from seatide.store.views import job_events, overview
from tests.api.test_inspection import TWO_PIPELINES
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.leader import elected
from tests.store.test_store import store, submit  # noqa: F401  (a fixture)

OLD, NEW = "old-Secret-9876", "new-Secret-5432"


def _earlier_incarnation(store, tmp_path):
    """j1's run is at incarnation 8 (config with NEW); its incarnation 7's result (config with OLD) is kept,
    with an event of incarnation 7 that holds OLD bare, and its release's RELEASE_LEFT_HELD."""
    submit(store, tmp_path, "j1", TWO_PIPELINES.replace("hunter2", NEW))
    with store.write() as conn:
        run_id = conn.execute(select(s.jobs.c.run_id)).scalar()
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(incarnation=8, status="FAILED"))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(incarnation=8))
        conn.execute(s.job_results.insert().values(
            job_id="j1", incarnation=7, run_id=run_id, config=TWO_PIPELINES.replace("hunter2", OLD),
            variables="{}", status="FAILED", cleanup="CLEAN", cleanup_due_at=0.0, cleanup_tries=0,
            next_cleanup_at=0.0, expires_at=0.0, created_at=0.0))
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", 7, None, run_id=run_id,
                     source="source[0]", connector="Postgres-CDC", holds="old_slot",
                     why=f"asked with password {OLD}", settle="drop it")
        record_event(conn, "ATTEMPT_FAILED", "worker:w0", "j1", 7, None, run_id=run_id,
                     error=f"FATAL: login as postgres with {OLD} refused")
        record_event(conn, "ATTEMPT_FAILED", "worker:w0", "j1", 8, None, run_id=run_id,
                     error=f"FATAL: login as postgres with {NEW} refused")
        return conn.execute(select(s.job_results).where(s.job_results.c.incarnation == 7)).one()


def _shown(store) -> str:
    with store.read() as conn:
        return json.dumps([job_events(conn, "j1"), overview(conn)["leftBehind"]])


def test_an_earlier_incarnations_expiry_leaves_its_events_masked(store, tmp_path):
    result = _earlier_incarnation(store, tmp_path)
    assert OLD not in _shown(store) and NEW not in _shown(store)        # masked while the result is kept
    lease = elected(store)
    # the cleanup's own step: an earlier incarnation's expiry, the run going on (decide_cleanup's last case)
    apply_cleanup(store, lease.epoch, "coordinator:c1", result, [Forget(whole_run=False)], lambda attempt: None)
    with store.read() as conn:
        assert conn.execute(select(s.job_results)).all() == []          # the config with OLD is gone
    shown = _shown(store)
    assert OLD not in shown and NEW not in shown, shown
    with store.read() as conn:
        [left] = overview(conn)["leftBehind"]
        [failed] = [e for e in job_events(conn, "j1") if e["kind"] == "ATTEMPT_FAILED" and e["incarnation"] == 7]
    # what is no secret stays: the slot (its record is still matched by it), the rest of the text
    assert left["holds"] == "old_slot" and left["why"] == "asked with password ******", left
    assert failed["detail"] == {"error": "FATAL: login as postgres with ****** refused"}, failed


def test_a_runs_expiry_leaves_its_events_masked_with_its_result_and_job_row(store, tmp_path):
    _earlier_incarnation(store, tmp_path)
    with store.write() as conn:     # the run's own expiry: its results and the job row go
        forget_job(conn, "j1", 8)
        assert conn.execute(select(s.jobs)).all() == []
    shown = _shown(store)
    assert OLD not in shown and NEW not in shown, shown
    assert "FATAL: login as postgres with ****** refused" in shown and "old_slot" in shown, shown
