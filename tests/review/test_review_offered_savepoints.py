"""Outside review of 7d56489..HEAD: a refusal of `--from N` offers savepoints that the same check refuses."""

from __future__ import annotations

import pytest

from seatide import intents
from tests.store.test_dropped_output import DROPPED
from tests.store.test_owed_prepare import leader  # noqa: F401  leader
from tests.store.test_resume_from_named_savepoint import _fresh_start_after_savepoint_2


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_refusal_offers_only_savepoints_that_can_be_restored(leader, tmp_path):
    store = _fresh_start_after_savepoint_2(leader, tmp_path, DROPPED)   # savepoint 2 is older than a DROP_DATA
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(store, "j1", savepoint_id=99, actor="t")
    offered = str(refused.value)
    print("OFFERED:", offered)
    with pytest.raises(intents.Refusal) as again:
        intents.resume(store, "j1", savepoint_id=2, actor="t")
    print("THEN:", again.value)
    assert "its savepoints: 2 (taken" not in offered, offered
