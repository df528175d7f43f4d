"""Review 7: the way on a first run's door refusal names does not work. Two LocalFile sinks write one
path spelled "out" and "out/" (one target to the door, two to plan/shared_targets, whose options
differ), one DROP_DATA, one APPEND_DATA. Pipeline 2 (APPEND_DATA) finishes first; pipeline 1's
DROP_DATA is refused at the door (store/kept_output.py), and the refusal says: "give every one of
them the same data_save_mode and schema_save_mode ..., then submit it again (or resume it with that
config)". Resumed with DROP_DATA on both sinks, as told: pipeline 2 FINISHED is not run again and
keeps its rows, so pipeline 1's DROP_DATA is refused again (promise 3: the how-to-fix must work).

Since store/target_identity.py (one key per target, for the plan and the door) "out" and "out/" are
refused when submitted, and the way on that refusal names (the same save modes, submitted again)
works; so are targets that overlap without being one ("out" and "out/b", review 8 H1: the door's
refusal came or not as the pipelines came), and the ways on that refusal names work.
Real jobs in the shared SparkSession on a real SQLite store and real files (tests/e2e/harness.py).
"""

from __future__ import annotations

import pytest

from seatide import intents
from tests.e2e.test_jobs import parquet_ids

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string, value = double } }"


def _job(out: str, first: str, second: str, inner: str = "", path_b: str | None = None) -> str:
    path_b = f"{out}/{inner}" if path_b is None else path_b
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
  LocalFile {{ plugin_input = "b2", path = "{path_b}", file_format_type = "parquet", data_save_mode = "{second}" }}
}}
"""


def test_the_way_on_a_refusal_of_one_path_spelled_two_ways_works(local, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(intents.Refusal, match="the same data_save_mode and schema_save_mode"):
        local.run(_job(out, "DROP_DATA", "APPEND_DATA"))
    done = local.run(_job(out, "DROP_DATA", "DROP_DATA"))                # the way on, as told
    assert done.status == "FINISHED", f"the way on it named: {done.status}: {done.error}"
    assert parquet_ids(out) == list(range(30)) + list(range(1000, 1030))


def test_the_way_on_a_refusal_of_overlapping_paths_works(local, tmp_path):
    """"out" (DROP_DATA) and "out/b" (APPEND_DATA) ran, and the door refused pipeline 1 or not as
    the pipelines came (review 8, H1); refused when submitted now, naming both paths, and each way
    on it names works."""
    out = str(tmp_path / "out")
    with pytest.raises(intents.Refusal, match="write paths apart") as refused:
        local.run(_job(out, "DROP_DATA", "APPEND_DATA", "b"))
    assert f"path {out}/b" in str(refused.value), refused.value
    kept = local.run(_job(out, "APPEND_DATA", "APPEND_DATA", "b"))        # save modes that keep data
    assert kept.status == "FINISHED", f"the way on it named: {kept.status}: {kept.error}"
    assert sorted(parquet_ids(out)) == list(range(30)) + list(range(1000, 1030))
    apart = str(tmp_path / "apart")
    done = local.run(_job(apart, "DROP_DATA", "APPEND_DATA", path_b=apart + "-b"))   # paths apart
    assert done.status == "FINISHED", f"the way on it named: {done.status}: {done.error}"
    assert parquet_ids(apart) == list(range(30)) and parquet_ids(apart + "-b") == list(range(1000, 1030))
