"""A stop with a savepoint while one pipeline fails: that savepoint is no savepoint of the job, and a plain
resume finishes with every row once (outside review 1, F1).

A stop with a savepoint waits for each pipeline's running batch (``runtime/driver.py``, ``_supervise``).
Pipeline 2's batch 1 breaks its Assert sink's MAX_ROW meanwhile: pipeline 2 ends FAILED, pipeline 1
SAVEPOINT_DONE, and ``_take_savepoint`` copies pipeline 1 alone. A savepoint is all or nothing
(``store/savepoint_scope.py``, ``left_out``): ``--from`` it is refused, naming pipeline 2 and the plain resume;
that resume restores each pipeline from its own checkpoint and the job FINISHES, each sink holding every
row once (pipeline 2's file sink too, whose batch 1 was written before its Assert failed).

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py): pipeline 1
is held at batch 1's start until the stop (a gate the stop releases), pipeline 2 before batch 1's first sink
write until the test sees pipeline 1's query stopped. Two batches of 300 rows each: the fewest that hold a
committed batch and a failed one.
"""

from __future__ import annotations

import os
import time

import pytest

from seatide import failpoints, intents
from seatide.store.restore import latest_savepoint_id
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark
ROWS = 600
# BATCH in micro-batches of 300 rows (two for ROWS), no retry: a failure ends the attempt and the job.
TWO_BATCH_ENV = """env { job.mode = BATCH
  parallelism = 1
  checkpoint.interval = 1000
  micro-batch.max-rows = 300
  job.retry.times = 0
  job.retry.interval.seconds = 0 }"""


def _job(out: str, out2: str, max_row: int) -> str:
    fake = ('FakeSource {{ plugin_output = "{0}", row.num = 600, split.num = 4, sequence.field = "id", '
            'schema = {{ fields {{ id = bigint }} }} }}')
    return f"""
{TWO_BATCH_ENV}
source {{ {fake.format("a")}
  {fake.format("b")} }}
sink {{ LocalFile {{ plugin_input = "a", path = "{out}", file_format_type = "parquet" }}
  LocalFile {{ plugin_input = "b", path = "{out2}", file_format_type = "parquet" }}
  Assert {{ plugin_input = "b", rules {{ row_rules = [{{ rule_type = MAX_ROW, rule_value = {max_row} }}] }} }} }}
"""


def test_a_savepoint_without_a_pipeline_that_failed_meanwhile_is_refused_and_a_plain_resume_finishes(
        local, tmp_path, monkeypatch):
    out, out2, opened = str(tmp_path / "out"), str(tmp_path / "out2"), str(tmp_path / "gate2")
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@1", f"gate:1:{tmp_path / 'never'}")
    # pipeline 2's two sinks of batch 0 pass; batch 1's first write waits for the stop
    monkeypatch.setitem(failpoints._POINTS, "driver.before_sink_write@2", f"gate:2:{opened}")
    monkeypatch.setattr(failpoints, "_HITS", {})

    def stop(store, job_id):
        deadline = time.time() + 120
        while time.time() < deadline and not (os.path.isdir(out) and len(parquet_ids(out)) >= 300
                                               and failpoints._HITS.get("driver.before_sink_write@2", 0) >= 3):
            time.sleep(0.1)
        intents.stop(store, job_id, savepoint=True, actor="test")
        # pipeline 1, held at batch 1's start, is released by the stop: its query ends
        while time.time() < deadline and any(q.name == f"seatide-{job_id}-1" for q in local.spark.streams.active):
            time.sleep(0.1)
        open(opened, "w").close()       # pipeline 2's batch 1 goes on, and breaks MAX_ROW 300
    first = local.run(_job(out, out2, 300), stop_after=stop)
    statuses = {p.pipeline_id: p.status for p in first.pipelines()}
    assert first.status == "FAILED" and statuses == {1: "SAVEPOINT_DONE", 2: "FAILED"}, (first.status, statuses,
                                                                                         first.error)
    savepoints = [c.checkpoint_id for c in first.checkpoints() if c.kind == "SAVEPOINT" and c.status == "COMPLETED"]
    assert len(savepoints) == 1 and latest_savepoint_id(local.store, first.job_id) is None
    # pipeline 2's file sink committed batch 1 before its Assert failed: the resume must not write it again
    assert parquet_ids(out) == list(range(300)) and parquet_ids(out2) == list(range(ROWS))
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start@1")
    monkeypatch.delitem(failpoints._POINTS, "driver.before_sink_write@2")
    # the operator fixes pipeline 2's rule; the savepoint is refused, with the way on
    text = _job(out, out2, ROWS)
    with pytest.raises(intents.Refusal) as refused:
        intents.resume(local.store, first.job_id, text=text, savepoint_id=savepoints[0], actor="test")
    assert "does not hold pipeline 2" in str(refused.value) and "Resume without --from" in str(refused.value)
    intents.resume(local.store, first.job_id, text=text, actor="test")
    resumed = local.drive(first.job_id)
    assert resumed.status == "FINISHED", (resumed.status, resumed.error)
    assert parquet_ids(out) == list(range(ROWS)) and parquet_ids(out2) == list(range(ROWS))
