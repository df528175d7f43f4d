"""Real jobs end to end in the shared SparkSession: sources, transforms, sinks, exactly-once."""

from __future__ import annotations

import os
import time

import pyarrow.parquet as pq
import pytest

from seatide.store.jobs import request_stop

pytestmark = pytest.mark.spark


def parquet_ids(path: str) -> list[int]:
    files = [os.path.join(root, f) for root, dirs, names in os.walk(path)
             for f in names if f.endswith(".parquet") and not root[len(path):].startswith(("/.", "/_"))]
    ids = []
    for f in files:
        ids.extend(pq.read_table(f).column("id").to_pylist())
    return sorted(ids)


def fake_to_parquet(out: str, rows: int, extra_env: str = "", split_num: int = 4, parallelism: int = 1) -> str:
    return f"""
env {{
  job.mode = BATCH
  parallelism = {parallelism}
  job.retry.interval.seconds = 0
  {extra_env}
}}
source {{
  FakeSource {{
    plugin_output = "fake"
    row.num = {rows}
    split.num = {split_num}
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string, value = double }} }}
  }}
}}
transform {{
  Sql {{ plugin_input = "fake", plugin_output = "out", query = "select id, upper(name) as name, value from fake" }}
}}
sink {{
  LocalFile {{ plugin_input = "out", path = "{out}", file_format_type = "parquet" }}
}}
"""


def test_plain_batch_job_writes_every_row_once(local, tmp_path):
    out = str(tmp_path / "out")
    run = local.run(fake_to_parquet(out, rows=500, parallelism=2))
    assert run.status == "FINISHED", run.error
    assert parquet_ids(out) == list(range(1000))
    (pipeline,) = run.pipelines()
    assert (pipeline.status, pipeline.rows_read, pipeline.rows_written) == ("FINISHED", 1000, 1000)
    assert len(run.checkpoints()) == 1


def test_checkpointed_batch_job_runs_in_bounded_micro_batches(local, tmp_path):
    out = str(tmp_path / "out")
    run = local.run(fake_to_parquet(out, rows=2000, split_num=8,
                                    extra_env="checkpoint.interval = 1000\nmicro-batch.max-rows = 500"))
    assert run.status == "FINISHED", run.error
    assert parquet_ids(out) == list(range(2000))
    batches = [c.batch_id for c in run.checkpoints()]
    assert len(batches) >= 4 and batches == sorted(batches)
    assert [c.checkpoint_id for c in run.checkpoints()] == list(range(1, len(batches) + 1))
    assert run.pipelines()[0].rows_read == 2000
    assert all(c.rows <= 500 for c in run.checkpoints())


def test_cancel_takes_effect_at_the_next_batch_boundary(local, tmp_path, monkeypatch):
    from seatide import failpoints

    out = str(tmp_path / "out")
    # three batches commit; the fourth is held at its start until the cancel arrives
    monkeypatch.setitem(failpoints._POINTS, "driver.batch_start", f"gate:3:{tmp_path / 'gate'}")
    monkeypatch.setattr(failpoints, "_HITS", {})

    def cancel_after_three_batches(store, job_id):
        from seatide.store.views import job_info
        deadline = time.time() + 120
        while time.time() < deadline:
            with store.read() as conn:
                if job_info(conn, job_id)["metrics"]["SinkWriteCount"] >= 300:
                    break
            time.sleep(0.1)
        request_stop(store, job_id, savepoint=False, actor="test")

    run = local.run(fake_to_parquet(out, rows=2000, split_num=20,
                                    extra_env="checkpoint.interval = 1000\nmicro-batch.max-rows = 100"),
                    stop_after=cancel_after_three_batches)
    assert run.status == "CANCELED", run.error
    assert parquet_ids(out) == list(range(300)), "no batch after the one running when the cancel came"


def test_replayed_micro_batch_writes_nothing_twice(local, tmp_path):
    """Sinks committed batch N, then the driver died before Spark's commit: N is replayed."""
    out = str(tmp_path / "out")
    text = fake_to_parquet(out, rows=1200, split_num=6, extra_env="checkpoint.interval = 1000\nmicro-batch.max-rows = 400")
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    job = run.job()
    (pipeline,) = run.pipelines()
    spark_dir = os.path.join(pipeline.checkpoint_dir, "spark")
    last = max(int(n) for n in os.listdir(os.path.join(spark_dir, "commits")) if n.isdigit())
    # Rewind Spark's own progress by one batch, as a crash between the sink commit and Spark's
    # commit would leave it, and run the same job id again on the same checkpoint.
    os.remove(os.path.join(spark_dir, "commits", str(last)))
    before = sorted(os.listdir(out))
    replay = _rerun_same_checkpoint(local, job, pipeline)
    assert replay.status == "FINISHED", replay.error
    assert sorted(os.listdir(out)) == before, "the replayed batch published files again"
    assert parquet_ids(out) == list(range(1200))


def test_an_attempt_killed_after_its_checkpoint_before_sparks_commit_restores_from_that_checkpoint(
        local, tmp_path, monkeypatch):
    """The checkpoint is recorded in the store before Spark writes its own commit log: an
    attempt that dies in between leaves checkpoint K recorded and Spark's commits/K missing.
    The next attempt starts from checkpoint K (Spark replays K, whose sinks decided it), so it
    counts as a restore, at batch K, as any attempt killed later would."""
    from seatide import failpoints
    from seatide.store import schema as s
    from sqlalchemy import select

    out = str(tmp_path / "out")
    monkeypatch.setitem(failpoints._POINTS, "driver.after_checkpoint", f"once:raise:{tmp_path / 'crashed'}")
    run = local.run(fake_to_parquet(out, rows=600, split_num=6,
                                    extra_env="checkpoint.interval = 1000\nmicro-batch.max-rows = 300"))
    assert run.status == "FINISHED", run.error
    assert os.path.exists(tmp_path / "crashed") and len(run.attempts()) == 2
    assert parquet_ids(out) == list(range(600))
    (pipeline,) = run.pipelines()
    assert pipeline.restores == 1
    with local.store.read() as conn:
        restored = [e.detail for e in conn.execute(select(s.events).where(
            (s.events.c.job_id == run.job_id) & (s.events.c.kind == "CHECKPOINT_RESTORED")))]
    assert len(restored) == 1 and '"batch": 0' in restored[0]


def test_a_job_failed_after_its_checkpoint_before_sparks_commit_is_resumed_from_that_checkpoint(
        local, tmp_path, monkeypatch):
    """The same window, then a resume (a new incarnation, as after `seatide run` is killed there):
    the new incarnation restores from checkpoint 0, and says so, though Spark's log lacks it."""
    from seatide import failpoints, intents
    from seatide.store import schema as s
    from sqlalchemy import select

    out = str(tmp_path / "out")
    monkeypatch.setitem(failpoints._POINTS, "driver.after_checkpoint", f"once:raise:{tmp_path / 'crashed'}")
    failed = local.run(fake_to_parquet(out, rows=600, split_num=6, extra_env="checkpoint.interval = 1000\n"
                                       "micro-batch.max-rows = 300\njob.retry.times = 0"))
    assert failed.status == "FAILED" and os.path.exists(tmp_path / "crashed")
    intents.resume(local.store, failed.job_id, actor="test")
    resumed = local.drive(failed.job_id)
    assert resumed.status == "FINISHED", resumed.error
    assert parquet_ids(out) == list(range(600))
    with local.store.read() as conn:
        restores = conn.execute(select(s.pipelines.c.restores).where(
            (s.pipelines.c.job_id == failed.job_id) & (s.pipelines.c.incarnation == 2))).scalar()
        restored = [e.detail for e in conn.execute(select(s.events).where(
            (s.events.c.job_id == failed.job_id) & (s.events.c.kind == "CHECKPOINT_RESTORED")))]
    assert restores == 1
    assert len(restored) == 1 and '"batch": 0' in restored[0]


def _rerun_same_checkpoint(local, job, pipeline):
    from sqlalchemy import update

    from seatide.store import schema as s

    with local.store.write() as conn:   # a new run of the pipeline on the kept checkpoint
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job.job_id).values(status="PENDING", finished_at=None))
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == job.job_id).values(status="CREATED"))
        conn.execute(s.job_results.delete())
    return local.drive(job.job_id)


def test_assert_violation_fails_the_job_without_retrying(local, tmp_path):
    text = """
env { job.mode = BATCH }
source { FakeSource { row.num = 50, sequence.field = "id", schema = { fields { id = bigint } } } }
sink {
  Assert {
    rules {
      row_rules = [{ rule_type = MAX_ROW, rule_value = 10 }]
    }
  }
}
"""
    run = local.run(text)
    assert run.status == "FAILED"
    assert "MAX_ROW" in run.error and "10" in run.error
    assert len(run.attempts()) == 1, "a violated rule is not worth a retry"


def test_multi_pipeline_job_runs_each_pipeline(local, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    text = f"""
env {{ job.mode = BATCH }}
source {{
  FakeSource {{ plugin_output = "x", row.num = 30, sequence.field = "id", schema = {{ fields {{ id = bigint }} }} }}
  FakeSource {{ plugin_output = "y", row.num = 40, sequence.field = "id", schema = {{ fields {{ id = bigint }} }} }}
}}
sink {{
  LocalFile {{ plugin_input = "x", path = "{a}", file_format_type = "parquet" }}
  LocalFile {{ plugin_input = "y", path = "{b}", file_format_type = "parquet" }}
}}
"""
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    assert [p.status for p in run.pipelines()] == ["FINISHED", "FINISHED"]
    assert parquet_ids(a) == list(range(30)) and parquet_ids(b) == list(range(40))


def test_one_source_two_sinks_in_one_micro_batch_query(local, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    text = f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 100 }}
source {{ FakeSource {{ plugin_output = "x", row.num = 300, split.num = 3, sequence.field = "id",
                        schema = {{ fields {{ id = bigint, name = string }} }} }} }}
transform {{ Filter {{ plugin_input = "x", plugin_output = "ids", include_fields = [id] }} }}
sink {{
  LocalFile {{ plugin_input = "x", path = "{a}", file_format_type = "parquet" }}
  LocalFile {{ plugin_input = "ids", path = "{b}", file_format_type = "parquet" }}
}}
"""
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    (pipeline,) = run.pipelines()
    assert parquet_ids(a) == list(range(300)) and parquet_ids(b) == list(range(300))
    assert (pipeline.rows_read, pipeline.rows_written) == (300, 600)
    assert pq.read_table(next(os.path.join(r, f) for r, _, fs in os.walk(b) for f in fs
                              if f.endswith(".parquet"))).column_names == ["id"]


def test_streaming_job_checkpoints_until_canceled(local, tmp_path):
    out = str(tmp_path / "out")
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 }}
source {{ FakeSource {{ row.num = 100000, split.num = 1000, split.read-interval = 200, sequence.field = "id",
                        schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet" }} }}
"""

    def cancel_after_checkpoints(store, job_id):
        from seatide.store.views import job_info
        deadline = time.time() + 120
        while time.time() < deadline:
            with store.read() as conn:
                if (job_info(conn, job_id)["checkpoint"]["completed"] or 0) >= 3:
                    break
            time.sleep(0.2)
        request_stop(store, job_id, savepoint=False, actor="test")

    run = local.run(text, stop_after=cancel_after_checkpoints)
    assert run.status == "CANCELED"
    ids = parquet_ids(out)
    assert len(run.checkpoints()) >= 3
    assert ids == list(range(len(ids))) and ids, "a canceled stream wrote a prefix of ids, each once"


def test_console_prints_rows_with_their_kind(local):
    text = """
env { job.mode = BATCH }
source {
  FakeSource {
    schema = { fields { id = bigint, name = string } }
    rows = [
      { kind = INSERT, fields = [1, "a"] },
      { kind = DELETE, fields = [2, "b"] }
    ]
  }
}
sink { Console {} }
"""
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    assert "+I" in run.stdout and "-D" in run.stdout and '"a"' in run.stdout


def test_file_sink_refuses_kinds_it_cannot_apply_before_running(local):
    from seatide.config.job import ConfigError
    from seatide.config.loader import load_job_text

    text = """
source { FakeSource { schema = { fields { id = bigint } }, rows = [{ kind = DELETE, fields = [1] }] } }
sink { LocalFile { path = "/tmp/never", file_format_type = "json" } }
"""
    with pytest.raises(ConfigError, match="cannot apply DELETE"):
        load_job_text(text)



def test_stateful_sql_resumes_from_its_state(local, tmp_path):
    """A streaming aggregation, canceled and resumed: its counts continue from the checkpointed state."""
    import json as _json

    from seatide import intents

    out = str(tmp_path / "out")
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 }}
source {{ FakeSource {{ plugin_output = "fake", row.num = 100000, split.num = 1000, split.read-interval = 200,
                        sequence.field = "id", schema = {{ fields {{ id = bigint }} }} }} }}
transform {{ Sql {{ plugin_input = "fake", plugin_output = "agg",
                    query = "select k, count(*) as n, max(id) as top from (select 'all' as k, id from fake) t group by k" }} }}
sink {{ LocalFile {{ plugin_input = "agg", path = "{out}", file_format_type = "json" }} }}
"""

    def cancel_after(checkpoints):
        def stop(store, job_id):
            from seatide.store.views import job_info
            deadline = time.time() + 120
            while time.time() < deadline:
                with store.read() as conn:
                    if (job_info(conn, job_id)["checkpoint"]["completed"] or 0) >= checkpoints:
                        break
                time.sleep(0.2)
            request_stop(store, job_id, savepoint=False, actor="test")
        return stop

    def latest_row():
        rows = []
        for root, dirs, files in os.walk(out):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            for name in files:
                if name.endswith(".json"):
                    rows += [_json.loads(line) for line in open(os.path.join(root, name)) if line.strip()]
        return max(rows, key=lambda r: r["top"])

    first = local.run(text, stop_after=cancel_after(3))
    assert first.status == "CANCELED"
    before = latest_row()
    assert before["n"] == before["top"] + 1
    intents.resume(local.store, first.job_id, actor="test")
    second = local.drive(first.job_id, stop_after=cancel_after(3))
    assert second.status == "CANCELED"
    after = latest_row()
    assert after["top"] > before["top"], "the resumed stream made progress"
    assert after["n"] == after["top"] + 1, "the count restarted instead of continuing from the checkpointed state"
