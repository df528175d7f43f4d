"""Outside review of a7e109b..db1751c, F3: store/left_out.name_savepoints_holding names a savepoint as restoring a
brought-back pipeline "and writes no row twice" when no COMPLETED CHECKPOINT row is newer than it. But a batch is
committed (its sink's decision, sink_manifests, or a begun batch of a sink that commits in its own system) BEFORE
its checkpoint row is written (store/decided_batches.py): a driver killed between the two leaves rows committed
after the savepoint with no checkpoint row. The advice is then given though pipeline 2 committed batch 4 after
savepoint 5; `--from 5` rewinds it to batch 3."""

from __future__ import annotations

import json
import os
import time

import pytest
from sqlalchemy import insert

from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from tests.store.test_left_out_savepoint_advice import at_batch_3_with_savepoint_5
from tests.store.test_savepoint_restores_pipeline_left_out_since import (ONE, TWO, _cancelled, _resume, _rows,
                                                                          _state)
from tests.store.test_store import store  # noqa: F401  (a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only


def test_a_batch_decided_after_the_savepoint_without_its_checkpoint_row_gets_no_savepoint_named(store, tmp_path):
    plan, pipelines = at_batch_3_with_savepoint_5(store, tmp_path)
    _resume(store, TWO)                  # incarnation 2: pipeline 2 plans batch 4, its sink decides (commits) it,
    two = pipelines[2].checkpoint_dir    # and the driver is killed before the checkpoint row
    _state(two, "l2", plan.pipelines[1].fingerprint(), 4)
    with store.write() as conn:
        conn.execute(insert(s.sink_manifests).values(
            job_id="j1", incarnation=2, pipeline_id=2, plugin_id="sink-0", transaction_id="T_j1_2_0_l2_4",
            batch_id=4, attempt_id=1, status="PUBLISHED", manifest=json.dumps({"publish": {}, "state": {}}),
            decided_at=time.time(), published_at=time.time()))
    _cancelled(store)
    _resume(store, ONE, fallback="fresh")    # incarnation 3: a config that leaves pipeline 2 out
    _cancelled(store)
    assert os.path.isfile(os.path.join(two, "spark", "offsets", "4"))

    with pytest.raises(RestoreRefused) as refused:      # incarnation 4 asked with both again
        _resume(store, TWO)
    message = str(refused.value)
    print(message)
    if "--from 5`), which restores it from its copy and writes no row twice" in message:
        try:
            _resume(store, TWO, savepoint_id=5)          # follow the advice, as a user would
        except RestoreRefused as again:
            pytest.fail(f"advised `--from 5`:\n{message}\n...and it is refused:\n{again}")
        job, now = _rows(store)
        pytest.fail(f"advised `--from 5` as writing no row twice:\n{message}\n...followed, pipeline 2 goes on from "
                    f"batch {now[2].last_batch_id} of savepoint 5's copy; batch 4, committed after it, is planned "
                    f"again (restore {job.restore})")
    assert "--from" not in message, message
    assert "a way on that writes none twice: leave it out again" in message, message
