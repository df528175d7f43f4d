"""Outside review 5 (failing on purpose): a resume whose Postgres-CDC slot is gone is known to be
unable to keep exactly-once while the resume is being answered (1f28c99 asks the server then),
yet the answer is an acceptance: `seatide resume JOB --cluster` (cli/client.resume_job) prints the
job id and exits 0, REST answers 200 with no warning, and the job goes FAILED a leader tick later.
SeaTide's promise: a resume that cannot keep exactly-once is refused clearly (as a release's is:
store/resumable.refuse_released raises RestoreRefused naming the way on)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from tests.databases.jobs import PG_URL
from tests.store.test_review5_position_check_time import _checkpointed_at_lsn
from tests.store.test_store import _end, store, submit  # noqa: F401  (store is a fixture)

JOB = f"""env {{ job.mode = "STREAMING" }}
source {{ Postgres-CDC {{ base-url = "{PG_URL}", username = "postgres", password = ""
  database-names = ["test"], schema-names = ["public"], table-names = ["test.public.r5_orders"] }} }}
sink {{ Console {{}} }}
"""


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_resume_whose_slot_is_gone_is_refused_or_says_so_in_its_answer(store, tmp_path):
    submit(store, tmp_path, text=JOB)     # the slot seatide_j1_..._1_source0 was never made on PG_URL: gone
    with store.read() as conn:
        directory = conn.execute(select(s.pipelines.c.checkpoint_dir).where(s.pipelines.c.job_id == "j1")).scalar()
    _checkpointed_at_lsn(directory)
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=0))
    _end(store, "j1", "CANCELED", "CLEAN")
    try:
        accepted = intents.resume(store, "j1", actor="api:c1")
    except intents.Refusal as refused:
        assert "no longer exists" in str(refused)
        return
    with store.read() as conn:
        job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == "j1")).one()
        kinds = [e.kind for e in conn.execute(select(s.events).where(s.events.c.job_id == "j1"))]
    assert "SOURCE_POSITION_GONE" in kinds and job.status == "PENDING"     # known now, while answering
    assert any("no longer exists" in w for w in accepted.warnings), (
        f"accepted (HTTP 200, CLI exit 0) with warnings {accepted.warnings}; the job will be FAILED")
