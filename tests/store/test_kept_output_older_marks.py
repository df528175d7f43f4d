"""A FINISHED pipeline whose last commit mark an earlier SeaTide wrote (a flat ``{"rows", "total_rows"}``
state from before targets existed, or a ``{"tables": ...}`` state) names no target: every target counts
(as in store/dropped_output.py), so a fresh start's DROP_DATA over a target it shares is refused at the
door rather than emptying rows nothing writes again (outside review 4, F1)."""

from __future__ import annotations

import pytest

from seatide.store.kept_output import kept_output
from tests.store.test_decided_batches import _decided_then_cancelled
from tests.store.test_kept_output import _finished_pipeline_2, _kept, _started_over, _targets
from tests.store.test_owed_prepare import leader  # noqa: F401  leader

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


@both_stores
@pytest.mark.parametrize("state", [{"rows": 3, "total_rows": 3}, {"tables": {"out": {"rows": 3}}}],
                         ids=["flat", "tables"])
def test_a_finished_pipelines_older_mark_keeps_its_rows(leader, tmp_path, state):
    _, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")
    _started_over(store, directory)
    _finished_pipeline_2(store, tmp_path, "/out", older_state=state)   # names no target
    message = _kept(store, "/out")
    assert message and "pipeline 2" in message, (
        "a fresh start's DROP_DATA over /out is let through although FINISHED pipeline 2 (marks of an "
        f"earlier SeaTide naming no target) committed rows there: {message!r}")


@both_stores
def test_a_finished_pipelines_mark_under_an_earlier_spelling_keeps_its_rows(leader, tmp_path):
    """A mark naming the target by an older key (``Target.earlier_keys``: a JDBC table named before its
    schema was, say) is the same target: the door passes those keys to the check."""
    _, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")
    _started_over(store, directory)
    _finished_pipeline_2(store, tmp_path, "old-out")
    assert _kept(store, "/out") is None            # the key alone does not tell
    with store.read() as conn:
        message = kept_output(conn, "j1", 1, "/out", ("old-out",))
    assert message and "pipeline 2, which FINISHED" in message, message
