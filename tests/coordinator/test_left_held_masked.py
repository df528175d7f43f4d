"""What a release left shows no secret of the job's: the slot's name neither, when a secret variable built it.

The review after eed0614 (shape 8): a ``left_held`` row masks the slot it names (``holds``) with its config's
secrets, but a slot told by its RELEASE_LEFT_HELD event alone (``told_only``), and the row the leader makes of it
(``adopt``: no config of its own), showed its name as written, and the coordinator's warning log line of the
release printed it too. A slot named ``cdc_${tenant}`` with ``tenant`` a secret variable showed the tenant.
Both stores; no source server is asked.
"""
from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from sqlalchemy import select

from seatide.config.loader import load_job_text
from seatide.coordinator.left_held_watch import look_at_left_held
from seatide.coordinator.source_release import _told_left
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.plugin.contexts import HeldPosition
from seatide.store import schema as s
from seatide.store.events import record_event
from seatide.store.jobs import submit_job
from seatide.store.views import job_info, overview
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.leader import elected
from tests.store.test_store import store  # noqa: F401  (a fixture)

TENANT = "acme7731"
SLOT = f"cdc_{TENANT}"
JOB = """
env { job.mode = "STREAMING", secret.variables = [tenant] }
source { Postgres-CDC { base-url = "jdbc:postgresql://127.0.0.1:5432/test", username = "postgres", password = "",
  table-names = ["test.public.items"], slot.name = "cdc_"${tenant} } }
sink { Console {} }
"""


def _submit(store, tmp_path) -> None:
    variables = {"tenant": TENANT}
    config = load_job_text(JOB, variables)
    submit_job(store, text=JOB, variables=variables, config=config, plan=build_plan(config),
               outline=outline_json(config), data_dir=str(tmp_path), job_id="j1")


def _shown(store) -> str:
    with store.read() as conn:
        return json.dumps([job_info(conn, "j1")["leftBehind"], overview(conn)["leftBehind"]])


def test_a_slot_named_after_a_secret_is_shown_masked_as_told_and_as_adopted(store, tmp_path):
    _submit(store, tmp_path)
    with store.write() as conn:
        run = conn.execute(select(s.jobs.c.run_id, s.jobs.c.incarnation)).one()
        record_event(conn, "RELEASE_LEFT_HELD", "coordinator:c0", "j1", run.incarnation, None, level="WARNING",
                     run_id=run.run_id, source="source[0]", connector="Postgres-CDC", holds=SLOT, retainedBytes=1,
                     state="extended", lost=False, why="an earlier SeaTide marked it", settle="drop it")
    for adopted in (False, True):      # as the event tells it, then as the row the leader's look makes of it
        if adopted:
            look_at_left_held(store, elected(store, "c1").epoch, "coordinator:c1", 2.0)
            with store.read() as conn:
                [row] = conn.execute(select(s.left_held)).all()
            assert row.holds == SLOT, row       # kept as named: the operator dismisses it by that name
        shown = _shown(store)
        assert TENANT not in shown and "cdc_******" in shown, (adopted, shown)


def test_the_release_warning_in_the_coordinators_log_masks_the_slot(store, tmp_path, caplog):
    _submit(store, tmp_path)
    with store.read() as conn:
        job = conn.execute(select(s.jobs)).one()
    left = SimpleNamespace(held=HeldPosition(SLOT, 1, state="extended"), why=f"{SLOT} is not known", settle="drop")
    spec = SimpleNamespace(name="Postgres-CDC", plugin_id="source[0]")
    with caplog.at_level(logging.WARNING), store.write() as conn:
        _told_left(conn, job, job, spec, left, "coordinator:c1", None)
    assert caplog.records and TENANT not in caplog.text and "cdc_******" in caplog.text, caplog.text
    assert TENANT not in _shown(store)
