"""Outside review 4 (failing on purpose): kept_output (store/kept_output.py) counts a pipeline's rows
only where its commit mark's state names the target under ``state["targets"]`` by the current key.
A FINISHED pipeline whose last mark an earlier SeaTide wrote (a flat ``{"rows", "total_rows"}``
state from before targets existed, which ``SinkTargets.previous_targets`` gives to the sink's one
target; or a ``{"tables": ...}`` state) names no target, so a fresh start's DROP_DATA over the shared
target is let through the door and empties the FINISHED pipeline's rows, which nothing writes again.
dropped_output (the put-back rule) counts every target when none is named; kept_output does not.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import insert

from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from tests.store.test_decided_batches import _decided_then_cancelled
from tests.store.test_kept_output import _kept, _started_over, _targets
from tests.store.test_owed_prepare import _pipeline, leader  # noqa: F401  leader

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


def _finished_by_an_earlier_seatide(store, tmp_path, state: dict) -> None:
    directory = str(tmp_path / "p2")
    write_json_atomic(os.path.join(directory, "seatide.json"), {"fingerprint": "f"})
    # an earlier SeaTide's mark: a bare state, no lineage
    write_json_atomic(os.path.join(directory, "sinks", "sink-0", "commit", "0.json"), state)
    row = _pipeline(store)
    with store.write() as conn:
        conn.execute(insert(s.pipelines).values(
            job_id="j1", incarnation=row.incarnation, pipeline_id=2, status="FINISHED", fingerprint="f",
            checkpoint_dir=directory, rows_read=3, rows_written=3, idle=False))


@both_stores
@pytest.mark.parametrize("state", [{"rows": 3, "total_rows": 3}, {"tables": {"out": {"rows": 3}}}],
                         ids=["flat", "tables"])
def test_a_finished_pipelines_older_mark_keeps_its_rows(leader, tmp_path, state):
    _, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")
    _started_over(store, directory)
    _finished_by_an_earlier_seatide(store, tmp_path, state)
    message = _kept(store, "/out")
    assert message and "pipeline 2" in message, (
        "a fresh start's DROP_DATA over /out is let through although FINISHED pipeline 2 (marks of an "
        f"earlier SeaTide naming no target) committed rows there: {message!r}")
