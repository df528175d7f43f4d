"""A pipeline a plain resume's config adds runs from nothing and writes its rows; the others go on, each
row once (outside review 3, F2: it was recorded with checkpoint directory "" and never ran).

Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py): the
one-pipeline job is held at batch 1's start (a gate the stop releases) and stopped with a savepoint after
batch 0; the resume's config adds a second pipeline (no ``--fallback``: a new pipeline has no state to
lose, as a new operator restored from a Flink savepoint starts empty). Two batches of 300 rows: the
fewest that leave the first pipeline something to go on with.
"""

from __future__ import annotations

import os
import time

import pytest

from seatide import failpoints, intents
from tests.e2e.test_jobs import parquet_ids
from tests.e2e.test_savepoint_with_failed_pipeline import TWO_BATCH_ENV

pytestmark = pytest.mark.spark
ROWS = 600


def _job(*outs: str) -> str:
    sources = "\n".join(f'FakeSource {{ plugin_output = "p{n}", row.num = {ROWS}, split.num = 4, sequence.field = '
                        f'"id", schema = {{ fields {{ id = bigint }} }} }}' for n, _ in enumerate(outs))
    sinks = "\n".join(f'LocalFile {{ plugin_input = "p{n}", path = "{out}", file_format_type = "parquet" }}'
                      for n, out in enumerate(outs))
    return f"""
{TWO_BATCH_ENV}
source {{ {sources} }}
sink {{ {sinks} }}
"""


def test_a_pipeline_added_by_a_plain_resume_runs_from_nothing_and_writes_every_row_once(local, tmp_path, monkeypatch):
    out, added = str(tmp_path / "out"), str(tmp_path / "added")
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@1", f"gate:1:{tmp_path / 'never'}")
    monkeypatch.setattr(failpoints, "_HITS", {})

    def stop(store, job_id):
        deadline = time.time() + 120
        while time.time() < deadline and not (os.path.isdir(out) and len(parquet_ids(out)) >= 300):
            time.sleep(0.1)
        intents.stop(store, job_id, savepoint=True, actor="test")
    first = local.run(_job(out), stop_after=stop)
    assert first.status == "SAVEPOINT_DONE", (first.status, first.error)
    assert parquet_ids(out) == list(range(300))
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start@1")
    accepted = intents.resume(local.store, first.job_id, text=_job(out, added), actor="test")
    assert accepted.warnings == ["pipeline 2: it is new (the job had no such pipeline): it starts from nothing, "
                                 "as at a submission"]
    resumed = local.drive(first.job_id)
    assert resumed.status == "FINISHED", (resumed.status, resumed.error)
    assert parquet_ids(out) == list(range(ROWS)) and parquet_ids(added) == list(range(ROWS))
