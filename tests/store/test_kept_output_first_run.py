"""Outside review 4 (failing on purpose): in a job's FIRST run (no resume, nothing started over),
kept_output refuses a DROP_DATA at the door whenever another pipeline of the job, writing the same
target with APPEND_DATA (a file sink's APPEND_DATA passes no door: nothing orders it after the
DROP_DATA), happened to commit its first batch before this pipeline's first batch reached the door.
The pipelines start one after the other in one driver, so which comes first is timing: the same new
job is accepted on one submission and refused permanently on the next, and the refusal's first way
on ("Submit the job again as a new job") is what the user just did. SeaTunnel runs every sink's
save mode once when the job starts, before any row, so the job works there."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import insert

from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from tests.store.test_decided_batches import _prepared
from tests.store.test_kept_output import _kept
from tests.store.test_owed_prepare import _job, _pipeline, leader  # noqa: F401  leader
from tests.store.test_owed_prepare import submit

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


@both_stores
def test_a_first_runs_drop_data_is_not_refused_for_a_racing_append(leader, tmp_path):
    _, store = leader
    submit(store, tmp_path)
    assert _job(store).incarnation == 1 and not (_job(store).restore or "").strip("{}")
    _prepared(_pipeline(store).checkpoint_dir)
    directory = str(tmp_path / "p2")          # pipeline 2 of the same first run: APPEND_DATA, batch 0 in
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "m1", "fingerprint": "f"})
    write_json_atomic(os.path.join(directory, "sinks", "sink-0", "commit", "0.json"),
                      {"seatide.lineage": "m1", "state": {"rows": 3, "targets": {"/out": {"rows": 3}}}})
    with store.write() as conn:
        conn.execute(insert(s.pipelines).values(
            job_id="j1", incarnation=1, pipeline_id=2, status="RUNNING", fingerprint="f",
            checkpoint_dir=directory, rows_read=3, rows_written=3, idle=False))
    message = _kept(store, "/out")
    assert message is None, f"the first run of a new job is refused at pipeline 1's door: {message}"
