"""Save modes that refuse (ERROR_WHEN_DATA_EXISTS, ERROR_WHEN_SCHEMA_NOT_EXIST) refuse the job before another sink's
save modes destroy anything (outside review of e20cc14..8348a57, A): they were decided only at the sink's own first
batch, after another sink's DROP_DATA had emptied its target (``SinkRun.check_ahead`` asks them ahead now)."""

from __future__ import annotations

import pytest

from tests.e2e.harness import InProcessCluster, dropped_and_guarded, fake_sources_job

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("pipelines", [1, 2], ids=["one-pipeline", "two-pipelines"])
def test_a_sinks_error_when_data_exists_refuses_before_another_sinks_drop_data(spark, tmp_path, pipelines):
    dropped, guarded = dropped_and_guarded(tmp_path)
    second = "s1" if pipelines == 1 else "s2"
    text = fake_sources_job(f"""
  LocalFile {{ plugin_input = "s1", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  LocalFile {{ plugin_input = "{second}", path = "{guarded}", file_format_type = "json",
               data_save_mode = "ERROR_WHEN_DATA_EXISTS" }}""", pipelines)
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "ERROR_WHEN_DATA_EXISTS" in run.error, run.error
    assert (dropped / "kept.json").exists(), sorted(p.name for p in dropped.iterdir())


@pytest.mark.parametrize("data_save_mode", ["APPEND_DATA", "DROP_DATA"])
def test_a_sinks_error_when_schema_not_exist_refuses_before_another_sinks_drop_data(spark, tmp_path, data_save_mode):
    """With DROP_DATA too: the sink's own save modes destroy (nothing, its path missing), and still refuse ahead."""
    dropped, _ = dropped_and_guarded(tmp_path)
    text = fake_sources_job(f"""
  LocalFile {{ plugin_input = "s1", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  LocalFile {{ plugin_input = "s1", path = "{tmp_path / 'missing'}", file_format_type = "json",
               schema_save_mode = "ERROR_WHEN_SCHEMA_NOT_EXIST", data_save_mode = "{data_save_mode}" }}""")
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "ERROR_WHEN_SCHEMA_NOT_EXIST" in run.error, run.error
    assert (dropped / "kept.json").exists(), sorted(p.name for p in dropped.iterdir())
