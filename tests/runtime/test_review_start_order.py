"""Outside review of e20cc14..8348a57, findings 3 and 4 (copied from /work/review/test_review_destroy_order.py):
a pipeline refused at its start, after the checks ahead (``schema_evolution.evolve``, Spark's checks of a
streaming query), came after the pipelines started before it had run their first batch and their DROP_DATA;
and a query Spark refuses as unsupported on a stream was retried, with Spark's plan in its message.
Every pipeline is now prepared before any query starts (runtime/pipeline_start.py)."""

from __future__ import annotations

import time

import pytest

from tests.e2e.harness import InProcessCluster, dropped_and_guarded, fake_sources_job

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string } }"


@pytest.mark.parametrize("env", ["job.mode = BATCH", "job.mode = BATCH, checkpoint.interval = 1000"],
                         ids=["plain-batch", "checkpointed"])
def test_a_pipeline_refused_at_start_fails_the_job_before_another_pipelines_drop_data(spark, tmp_path, monkeypatch,
                                                                                       env):
    """``PipelineRun.start`` may refuse a pipeline after the checks ahead: ``schema_evolution.evolve``
    raises a PermanentError when a source's tables changed under ``schema.change.behavior = exception``
    (schema_evolution.py:47), a Jdbc sink's ``evolve`` may refuse a change. Simulated here for pipeline 2
    (a CDC source needs a server): pipeline 1's query was started, and ran its first batch (DROP_DATA),
    before pipeline 2's ``start`` was even called (driver.run_attempt: start, wait_started, one at a time)."""
    from seatide.plugin.base import PermanentError
    from seatide.runtime import schema_evolution

    real = schema_evolution.evolve
    calls = []

    def evolve(checkpoint_dir, sources, writers):
        calls.append(checkpoint_dir)
        if not any(type(w.targets).__name__.startswith("LocalFile") or "File" in type(w.targets).__name__
                   for w in writers):
            time.sleep(3)     # the source's table_shapes() and the sinks' evolve ask their servers
            raise PermanentError("the source's tables changed and schema.change.behavior = exception: (simulated)")
        return real(checkpoint_dir, sources, writers)

    monkeypatch.setattr(schema_evolution, "evolve", evolve)
    dropped, _ = dropped_and_guarded(tmp_path)
    text = f"""
env {{ {env}, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{
  FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }}
  FakeSource {{ plugin_output = "s2", row.num = 3, sequence.field = "id", {FIELDS} }}
}}
sink {{
  LocalFile {{ plugin_input = "s1", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  Console {{ plugin_input = "s2" }}
}}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert len(calls) == 2 and "simulated" in run.error, (calls, run.error)
    assert (dropped / "kept.json").exists(), sorted(p.name for p in dropped.iterdir())


def test_a_pipeline_whose_query_spark_refuses_at_start_fails_the_job_before_another_pipelines_drop_data(
        spark, tmp_path):
    """No simulation: pipeline 2's SQL sorts a stream, which Spark's UnsupportedOperationChecker refuses
    at ``writeStream.start()`` (PipelineRun._start_query, in ``start``: after ``check_sinks_ahead``), a
    refusal known before any batch. Pipeline 1 was started (and waited for) first."""
    dropped, _ = dropped_and_guarded(tmp_path)
    text = fake_sources_job(f"""
  LocalFile {{ plugin_input = "s1", path = "{dropped}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  Console {{ plugin_input = "s3" }}""", pipelines=2, env="checkpoint.interval = 1000",
                            transform='Sql { plugin_input = "s2", plugin_output = "s3", query = "select * from s2 order by id" }')
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "ort" in run.error, run.error
    assert (dropped / "kept.json").exists(), sorted(p.name for p in dropped.iterdir())


def test_a_query_spark_refuses_as_unsupported_is_not_retried(spark, tmp_path):
    """Spark's UnsupportedOperationChecker raises an AnalysisException with no SQLSTATE ("Sorting is not
    supported on streaming DataFrames"): failures.permanent_cause finds none, so the job retries a query
    no retry can fix (each retry restarts the attempt: a new driver and JVM outside this harness)."""
    text = f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, parallelism = 1, job.retry.times = 2,
       job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ plugin_output = "s2", row.num = 3, sequence.field = "id", {FIELDS} }} }}
transform {{ Sql {{ plugin_input = "s2", plugin_output = "s3", query = "select * from s2 order by id" }} }}
sink {{ Console {{ plugin_input = "s3" }} }}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=5)
    assert run.status == "FAILED", run.error
    assert len(run.attempts()) == 1, (len(run.attempts()), run.error)
    assert "Spark refused the query: Sorting is not supported on streaming" in run.error, run.error
    assert "StreamingRelation" not in run.error, run.error     # the sentence, not Spark's plan
