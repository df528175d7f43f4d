"""A new job whose sinks write one target with different save modes (pipeline 1 DROP_DATA, pipeline 2
APPEND_DATA): a file sink's APPEND_DATA passes no door, so nothing orders pipeline 2's first batch after
pipeline 1's DROP_DATA. Before store/kept_output.py the DROP_DATA emptied that batch (rows lost); since,
it is refused, and a new submission races the same way (outside review 4, F3). SeaTunnel applies save
modes once, at job start. So such a config is refused when it is planned, naming both sinks and the
target (plan/shared_targets.py); where the target is known only at batch time, the door's refusal names
the way on that works: the same save modes on every sink of the target, never "submit again" alone."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import insert

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.runtime.commit_log import write_json_atomic
from seatide.store import schema as s
from tests.store.test_decided_batches import _prepared
from tests.store.test_kept_output import _kept
from tests.store.test_owed_prepare import _job, _pipeline, leader  # noqa: F401  leader
from tests.store.test_owed_prepare import submit

both_stores = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


def _two_sinks(out: str, first: str, second: str, other_out: str | None = None) -> str:
    source = 'FakeSource {{ plugin_output = "{}", row.num = 3, schema = {{ fields {{ id = bigint }} }} }}'
    sink = 'LocalFile {{ plugin_input = "{}", path = "{}", file_format_type = json, data_save_mode = {} }}'
    return (f"env {{ job.mode = BATCH }}\nsource {{\n  {source.format('a')}\n  {source.format('b')}\n}}\n"
            f"sink {{\n  {sink.format('a', out, first)}\n  {sink.format('b', other_out or out, second)}\n}}\n")


def test_sinks_of_one_target_with_different_save_modes_are_refused_when_planned(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(ConfigError) as refused:
        build_plan(load_job_text(_two_sinks(out, "DROP_DATA", "APPEND_DATA")))
    message = str(refused.value)
    assert "sink[0] LocalFile" in message and "sink[1] LocalFile" in message and f"path = {out}" in message, message
    assert "the same data_save_mode and schema_save_mode" in message, message
    assert len(build_plan(load_job_text(_two_sinks(out, "DROP_DATA", "DROP_DATA"))).pipelines) == 2
    build_plan(load_job_text(_two_sinks(out, "APPEND_DATA", "APPEND_DATA")))
    build_plan(load_job_text(_two_sinks(out, "DROP_DATA", "APPEND_DATA", str(tmp_path / "elsewhere"))))


@both_stores
def test_a_first_runs_door_refusal_names_the_same_save_mode_way_on(leader, tmp_path):
    """The target known only at batch time: pipeline 2's APPEND_DATA batch 0 came first. The DROP_DATA
    would lose it, so it is refused; resubmitting races again, so the way on is the same save modes."""
    _, store = leader
    submit(store, tmp_path)
    assert _job(store).incarnation == 1 and not (_job(store).restore or "").strip("{}")
    _prepared(_pipeline(store).checkpoint_dir)
    directory = str(tmp_path / "p2")
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": "m1", "fingerprint": "f"})
    write_json_atomic(os.path.join(directory, "sinks", "sink-0", "commit", "0.json"),
                      {"seatide.lineage": "m1", "state": {"rows": 3, "targets": {"/out": {"rows": 3}}}})
    with store.write() as conn:
        conn.execute(insert(s.pipelines).values(
            job_id="j1", incarnation=1, pipeline_id=2, status="RUNNING", fingerprint="f",
            checkpoint_dir=directory, rows_read=3, rows_written=3, idle=False))
    message = _kept(store, "/out")
    assert message and "pipeline 2" in message and "nothing was destroyed" in message, message
    assert "give every one of them the same data_save_mode and schema_save_mode" in message, message
    assert "as a new job" not in message, f"a first run's refusal offers the resubmission that races again: {message}"
