"""A fresh start (--fallback fresh, incarnation 2) whose driver prepared pipeline 1's new, empty
directory and was then cancelled before its first batch reached the door, resumed plainly (incarnation
3): its DROP_DATA still passes the door. Rows count from the incarnation that started the pipeline's
current lineage (its directory's mark), not from the run's first: the old lineage's batch 0 is what
the fresh start's DROP_DATA is for, and the new lineage writes every row again (outside review 4, F2:
refused before, so whether the job could go on depended on when it was cancelled)."""

from __future__ import annotations

import json
import time

import pytest

from seatide import intents
from seatide.runtime.checkpoint_move import prepare_checkpoint
from tests.store.test_decided_batches import _decided_then_cancelled, _prepared
from tests.store.test_kept_output import _kept, _started_over, _targets
from tests.store.test_owed_prepare import _cancel, _job, leader  # noqa: F401  leader

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


@both_stores
def test_a_cancelled_fresh_start_resumed_plainly_may_still_empty_its_old_lineages_rows(leader, tmp_path):
    coordinator, store, directory = _decided_then_cancelled(leader, tmp_path, 0)
    _targets(store, "/out")                      # lineage l1 committed batch 0 into /out (incarnation 1)
    _started_over(store, directory)              # incarnation 2: pipeline 1 starts over
    assert _kept(store, "/out") is None          # its DROP_DATA passes the door now...
    assert prepare_checkpoint(directory, 2, None, 2, time.time) is not None
    _prepared(directory, "l2")                   # ...its driver made the new lineage's directory
    _cancel(coordinator, store)                  # cancelled before its first batch reached the door
    intents.resume(store, "j1", actor="t")       # incarnation 3, in place: lineage l2, nothing committed
    assert _job(store).incarnation == 3 and json.loads(_job(store).restore)["prepare"] == {}
    message = _kept(store, "/out")
    assert message is None, f"lineage l2 writes every row again, yet its DROP_DATA is refused: {message}"
