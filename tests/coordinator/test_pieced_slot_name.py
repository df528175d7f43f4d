"""Outside review (rev2), F1 at the coordinator: the expiry of a job id's dead run drops the slot.name slot
its live newer run made and reads through, when the name is built from pieces (``${prefix}_pieced``): the
door's ``keep`` cannot see it (documented), and ownership.release_leaves lets a run of the same job id drop a
slot the mark says another run (the live one) made. FAILS on aa6b0a4."""

from __future__ import annotations

import time

from sqlalchemy import select, update

from seatide.config.loader import load_job_text
from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store import schema as s
from seatide.store.jobs import submit_job
from tests.coordinator.test_stale_leader import _cdc_job, _leader, _slots
from tests.coordinator.test_user_named_slot import _end, _fresh_slot, _run
from tests.store.test_store import store  # noqa: F401  (a fixture)
import tests.coordinator.test_user_named_slot as named

SLOT = "rev2_pieced"


def _submit(store, tmp_path, text: str, job_id: str, variables: dict) -> None:
    config = load_job_text(text, variables)
    submit_job(store, text=text, variables=variables, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id=job_id)


def test_the_expiry_of_a_dead_run_keeps_the_live_runs_pieced_slot_name(store, tmp_path, private_postgres, monkeypatch):
    monkeypatch.setattr(named, "SLOT", SLOT)
    text = _cdc_job(private_postgres, "user_named", "${prefix}_pieced")
    variables = {"prefix": "rev2"}
    _submit(store, tmp_path, text, "j1", variables)
    _end(store, "j1")
    _submit(store, tmp_path, text, "j1", variables)          # the same id again: a new run, the same slot name
    _fresh_slot(private_postgres, _run(store, "j1"))         # the new (live) run's driver makes its slot, marked
    with store.write() as conn:                              # the first run's history expires
        conn.execute(update(s.job_results).where(s.job_results.c.incarnation == 1).values(expires_at=0.0))
    lease = _leader(store, "c1")
    [expiring] = [r for r in due_results(store, time.time()) if r.incarnation == 1]
    reconcile_cleanup(store, lease.epoch, "coordinator:c1", expiring, [].append)
    try:
        assert _slots(private_postgres, SLOT) == [SLOT], "the dead run's expiry dropped the live run's slot"
    finally:
        for left in _slots(private_postgres, SLOT):
            with private_postgres.connect() as conn:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (left,))
