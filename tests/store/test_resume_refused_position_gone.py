"""A resume whose Postgres-CDC slot is gone from the real server (it was never made here) cannot
keep exactly-once: it is refused while it is answered, as a released job's is
(store/resumable.refuse_released): a RestoreRefused (REST 409, CLI exit 1) saying what is gone,
where, and the way on, and nothing is recorded (no new incarnation, the job stays as it ended)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.unusable_checkpoints import resume_command
from tests.databases.jobs import PG_URL
from tests.store.test_position_check_deadline import _checkpointed_at_lsn
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)

JOB = f"""env {{ job.mode = "STREAMING" }}
source {{ Postgres-CDC {{ base-url = "{PG_URL}", username = "postgres", password = ""
  database-names = ["test"], schema-names = ["public"], table-names = ["test.public.r5_orders"] }} }}
sink {{ Console {{}} }}
"""


def _stopped_with_its_slot_gone(store, tmp_path) -> None:
    submit(store, tmp_path, text=JOB)     # the slot seatide_j1_..._1_source0 was never made on PG_URL: gone
    with store.read() as conn:
        directory = conn.execute(select(s.pipelines.c.checkpoint_dir).where(s.pipelines.c.job_id == "j1")).scalar()
    _checkpointed_at_lsn(directory)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=0))
    _end(store, "j1", "CANCELED", "CLEAN")


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_resume_whose_slot_is_gone_is_refused_saying_what_where_and_how_on(store, tmp_path):
    _stopped_with_its_slot_gone(store, tmp_path)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", actor="api:c1")
    message = str(refused.value)
    assert refused.value.kind is intents.RefusalKind.CONFLICT        # REST 409, as every refused restore
    assert "cannot resume job j1" in message and "pipeline 1" in message
    assert "replication slot 'seatide_j1" in message and "no longer exists" in message     # what, where
    assert "LSN 0/1000" in message and "submit it again" in message                          # from where, how on
    assert "seatide resume j1 --fallback fresh" in message                                   # or start it over
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
    assert (job.incarnation, job.status) == (1, "CANCELED")          # nothing recorded


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_refusals_way_on_is_the_command_the_user_gave_with_fallback_fresh(store, tmp_path):
    """Review of the fresh-start fallback, F6: a resume with a changed job file was told to run
    ``seatide resume j1 --fallback fresh``, which resumes the job's own config instead."""
    _stopped_with_its_slot_gone(store, tmp_path)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", text=JOB, source="jobs/cdc v2.conf", actor="api:c1")
    assert "seatide resume j1 --config 'jobs/cdc v2.conf' --fallback fresh" in str(refused.value)
    assert resume_command("j1", 3) == "seatide resume j1 --from 3"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_resume_with_fallback_fresh_whose_slot_is_gone_starts_it_over(store, tmp_path):
    _stopped_with_its_slot_gone(store, tmp_path)
    accepted = intents.resume(store, "j1", fallback="fresh", actor="api:c1")
    assert any("pipeline 1: starts over" in w and "no longer exists" in w for w in accepted.warnings)
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
    assert (job.incarnation, job.status) == (2, "CREATED")
    assert json.loads(job.restore)["prepare"] == {"1": None}         # its driver starts it from startup.mode
