"""Outside review of a7e109b..db1751c, F1 (the --from form): a resume from savepoint 5 whose config leaves pipeline 3 out,
while pipeline 2 (added after savepoint 5) is not held by it. The refusal says starting pipeline 2 over
(`--from 5 --fallback fresh`) "would write again every row it committed", then names the very same command as the
way to leave pipeline 3 out "on purpose ... no other pipeline starts over for it". Followed, pipeline 2 starts
from nothing: its committed rows are written again (promises 1 and 2)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update

from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.store import schema as s
from seatide.store.job_ids import RestoreRefused
from seatide.store.restore import savepoint_dir
from seatide.store.unusable_checkpoints import resume_command
from tests.store.test_offered_savepoint_not_held import _savepoint
from tests.store.test_savepoint_restores_pipeline_left_out_since import ONE, TWO, _cancelled, _resume, _rows, _state
from tests.store.test_store import store, submit  # noqa: F401  (store is a fixture)
from tests.stores import sqlite_only

pytestmark = sqlite_only

THREE = """env { checkpoint.interval = 1000 }
source {
  LocalFile { plugin_output = "a", path = "/tmp/in_a", file_format_type = "parquet" }
  LocalFile { plugin_output = "b", path = "/tmp/in_b", file_format_type = "parquet" }
  LocalFile { plugin_output = "c", path = "/tmp/in_c", file_format_type = "parquet" }
}
sink {
  Console { plugin_input = "a" }
  Console { plugin_input = "b" }
  Console { plugin_input = "c" }
}
"""


def test_the_left_out_way_on_is_not_the_start_over_the_same_refusal_warns_of(store, tmp_path):
    three = build_plan(load_job_text(THREE))
    assert [p.pipeline_id for p in three.pipelines] == [1, 2, 3]
    fp = {p.pipeline_id: p.fingerprint() for p in three.pipelines}
    assert fp[1] == build_plan(load_job_text(ONE)).pipelines[0].fingerprint()
    assert fp[2] == build_plan(load_job_text(TWO)).pipelines[1].fingerprint()
    submit(store, tmp_path, text=ONE)                     # incarnation 1: pipeline 1, stopped with savepoint 5
    _, pipelines = _rows(store)
    with store.write() as conn:
        _state(pipelines[1].checkpoint_dir, "l1", fp[1], 3)
        _state(savepoint_dir(pipelines[1].checkpoint_dir, 5), "l1", fp[1], 3)
        _savepoint(conn, 1, 5, {"1": 3})
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == "j1").values(last_batch_id=3))
    _cancelled(store)
    _resume(store, THREE)                                 # incarnation 2 adds pipelines 2 and 3; they commit rows
    _, pipelines = _rows(store)
    for pid in (1, 2, 3):
        _state(pipelines[pid].checkpoint_dir, f"l{pid}", fp[pid], 6)
    _cancelled(store)

    command = resume_command("j1", 5)                     # as intents.resume passes it
    with pytest.raises(RestoreRefused) as refused:
        _resume(store, TWO, savepoint_id=5, command=command)   # leaves pipeline 3 out
    message = str(refused.value)
    print(message)
    warned = f"Starting it over (`{command} --fallback fresh`" in message and "would write again every row" in message
    offered = f"leave it out on purpose with `{command} --fallback fresh`" in message
    if warned and offered:
        _resume(store, TWO, savepoint_id=5, fallback="fresh", command=command)
        job, _ = _rows(store)
        pytest.fail(f"the refusal warns of and offers the same command:\n{message}\n...followed, fresh: "
                    f"{[e['pipeline'] for e in json.loads(job.restore)['fresh']]}")
    assert warned, message
    assert "leaving it out on purpose is not offered while a pipeline above has a problem" in message, message
