"""Review 7: the way on a first run's door refusal names does not work. Two LocalFile sinks write one
path spelled "out" and "out/" (one target to the door, two to plan/shared_targets, whose options
differ), one DROP_DATA, one APPEND_DATA. Pipeline 2 (APPEND_DATA) finishes first; pipeline 1's
DROP_DATA is refused at the door (store/kept_output.py), and the refusal says: "give every one of
them the same data_save_mode and schema_save_mode ..., then submit it again (or resume it with that
config)". Resumed with DROP_DATA on both sinks, as told: pipeline 2 FINISHED is not run again and
keeps its rows, so pipeline 1's DROP_DATA is refused again (promise 3: the how-to-fix must work).

Since store/target_identity.py (one key per target, for the plan and the door) "out" and "out/" are
refused when submitted, and the way on that refusal names (the same save modes, submitted again)
works; the door's first-run refusal comes where the targets overlap without being one ("out" and
"out/b"), and the way on it names works: resumed with a save mode that keeps data.
Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py).
"""

from __future__ import annotations

import pytest

from seatide import failpoints, intents
from tests.e2e.test_backup_before_another_pipelines_drop import until_pipeline_finished
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string, value = double } }"


def _job(out: str, first: str, second: str, inner: str = "") -> str:
    return f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.interval.seconds = 0, job.retry.times = 0,
      checkpoint.interval = 1000 }}
source {{
  FakeSource {{ plugin_output = "a", row.num = 30, split.num = 1, sequence.field = "id", {FIELDS} }}
  FakeSource {{ plugin_output = "b", row.num = 30, split.num = 1, sequence.field = "id", {FIELDS} }}
}}
transform {{
  Sql {{ plugin_input = "b", plugin_output = "b2", query = "select id + 1000 as id, name, value from b" }}
}}
sink {{
  LocalFile {{ plugin_input = "a", path = "{out}", file_format_type = "parquet", data_save_mode = "{first}" }}
  LocalFile {{ plugin_input = "b2", path = "{out}/{inner}", file_format_type = "parquet", data_save_mode = "{second}" }}
}}
"""


def _release_once_finished(gate: str, pipeline_id: int):
    """A stop_after: open ``gate`` once ``pipeline_id`` FINISHED."""
    def release(store, job_id):
        until_pipeline_finished(store, job_id, pipeline_id)
        open(gate, "w").close()
    return release


def test_the_way_on_a_refusal_of_one_path_spelled_two_ways_works(local, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(intents.Refusal, match="the same data_save_mode and schema_save_mode"):
        local.run(_job(out, "DROP_DATA", "APPEND_DATA"))
    done = local.run(_job(out, "DROP_DATA", "DROP_DATA"))                # the way on, as told
    assert done.status == "FINISHED", f"the way on it named: {done.status}: {done.error}"
    assert parquet_ids(out) == list(range(30)) + list(range(1000, 1030))


def test_the_way_on_a_first_runs_door_refusal_names_works(local, tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    gate = str(tmp_path / "release-1")
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start@1", f"gate:0:{gate}")
    first = local.run(_job(out, "DROP_DATA", "APPEND_DATA", "b"), stop_after=_release_once_finished(gate, 2))
    assert first.status == "FAILED", (first.status, first.error)
    assert "resume it with a save mode that keeps data" in (first.error or ""), first.error
    assert "resume it with that config" not in first.error, first.error        # refused again when followed
    assert parquet_ids(out) == list(range(1000, 1030)), "the refused DROP_DATA removed pipeline 2's rows"
    monkeypatch.delitem(failpoints._POINTS, "driver.batch_start@1")
    intents.resume(local.store, first.job_id, text=_job(out, "APPEND_DATA", "APPEND_DATA", "b"), actor="test")
    resumed = local.drive(first.job_id)
    assert resumed.status == "FINISHED", f"the way on it named: {resumed.status}: {resumed.error}"
    assert parquet_ids(out) == list(range(30)) + list(range(1000, 1030))
