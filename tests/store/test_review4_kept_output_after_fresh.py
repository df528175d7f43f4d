"""Outside review 4 (failing on purpose): kept_output counts a pipeline's rows "since the run began"
unless THIS incarnation started it over. A fresh start (--fallback fresh, incarnation 2) whose driver
prepared pipeline 1's new, empty directory and was then cancelled before its first batch reached the
door is resumed plainly (incarnation 3): pipeline 1 is no longer "started over" (``restore.prepare`` is
empty), so its OLD lineage's batch 0 (incarnation 1, before the fresh start) counts as rows "it does not
write again", and its DROP_DATA is refused at the door, although the new lineage writes every row from
nothing and emptying the old lineage's rows is exactly what the fresh start with DROP_DATA is for. The
same fresh start is accepted if its first attempt gets to the door: whether the job can go on depends on
when it was cancelled; the refusal's "save mode that keeps data" leaves the old lineage's rows doubled."""

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
