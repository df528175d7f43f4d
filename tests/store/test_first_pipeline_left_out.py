"""Outside review of a7e109b..db1751c, F2: pipeline ids are positional (plan/dag.py: in order of the first source), but
store/left_out.py takes "left out" as "an id of the job the config's plan lacks". A config that leaves out the
FIRST pipeline (source a) of a two-pipeline job is read as: pipeline 1's sources changed, pipeline 2 left out.
The refusal says "leave it [pipeline 2] out on purpose with --fallback fresh: its checkpoint stays in place, and
no other pipeline starts over for it". Followed, pipeline 1 (now source b and its sink, the very sources and sink
pipeline 2 ran) starts from nothing in pipeline 1's directory: every row pipeline 2 committed to sink b is
written again, while its checkpoint (the one that holds source b's position) is "kept in place" unused."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import insert, update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from tests.store.test_savepoint_restores_pipeline_left_out_since import TWO, _cancelled, _resume, _rows, _state
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only

B_ONLY = """env { checkpoint.interval = 1000 }
source { LocalFile { plugin_output = "b", path = "/tmp/in_b", file_format_type = "parquet" } }
sink { Console { plugin_input = "b" } }
"""


def test_leaving_the_first_pipeline_out_is_refused_with_no_start_over(store, tmp_path):
    submit(store, tmp_path, text=TWO)
    plan = build_plan(load_job_text(TWO))
    _, pipelines = _rows(store)
    with store.write() as conn:                  # incarnation 1: both at batch 3, committed
        for p in plan.pipelines:
            _state(pipelines[p.pipeline_id].checkpoint_dir, f"l{p.pipeline_id}", p.fingerprint(), 3)
            conn.execute(insert(s.checkpoints).values(
                job_id="j1", incarnation=1, checkpoint_id=p.pipeline_id + 2, pipeline_id=p.pipeline_id, batch_id=3,
                kind="CHECKPOINT", status="COMPLETED", created_at=time.time(), duration_ms=1, rows=10,
                source_offsets=json.dumps({"batch": 3}), fingerprint=p.fingerprint(), attempt_id=1))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=3))
    _cancelled(store)
    b = build_plan(load_job_text(B_ONLY)).pipelines[0]
    assert b.fingerprint() == plan.pipelines[1].fingerprint(), "the config's only pipeline IS the job's pipeline 2"

    with pytest.raises(RestoreRefused) as refused:
        _resume(store, B_ONLY)                   # the user leaves out pipeline 1 (source a)
    message = str(refused.value)
    print(message)
    if "leaves out pipeline 2" in message and "no other pipeline starts over for it" in message:
        _resume(store, B_ONLY, fallback="fresh")  # the way on it names: leave "pipeline 2" out on purpose
        job, _ = _rows(store)
        restore = json.loads(job.restore)
        pytest.fail(f"the left-out pipeline is misnamed and the way on writes rows twice:\n{message}\n...followed: "
                    f"fresh {restore['fresh']}: source b (committed to batch 3 by pipeline 2) starts from nothing "
                    f"into the same sink; carried: {restore['carried']}")
    assert "with `seatide resume j1 --fallback fresh`" not in message, message
    assert "Pipelines are matched by position" in message, message
