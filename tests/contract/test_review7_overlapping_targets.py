"""Review 7: a destructive save mode empties what its target's system holds, but store/kept_output.py
counts another pipeline's committed rows only when that pipeline's records name the *same target
key*. Two sinks whose targets overlap without equal keys are neither refused when planned
(plan/shared_targets.py: their options differ) nor at the door:

* LocalFile: DROP_DATA on ``path = out`` removes every file under it (``data_files`` walks down),
  also those of another pipeline's sink with ``path = out/b``, whose decided batches name ``out/b``;
* Jdbc: a sink in query mode (``query = "INSERT INTO t ..."``) has the target key ``.../query``, so
  a DROP_DATA sink with ``table = t`` DELETEs its committed rows.

Pipeline 2 (APPEND_DATA) commits batch 0 first (nothing orders the pipelines of a job), then
pipeline 1's DROP_DATA prepares its target. SeaTunnel applies DROP_DATA once, at job start, before
any row is written: pipeline 2's rows would stay. Promise 2: such a preparation is refused before
anything is destroyed, or the rows stay; here they are deleted, while pipeline 2 counts batch 0 as
committed (its replay writes nothing)."""

from __future__ import annotations

import io
import os

import pytest
from sqlalchemy import insert

from seatide.connectors.jdbc.sink import JdbcSink
from seatide.plugin.base import PermanentError, SinkContext
from seatide.plugin.options import read_options
from seatide.runtime.sink_runs import attempt_run, commit_log_of
from seatide.store import schema as s
from tests.contract.harness import Pipeline, Zombie, rows
from tests.contract.systems import JdbcSystem, LocalFileSystem, PaimonSystem
from tests.contract.test_sinks import mariadb_database, store  # noqa: F401 - the suite's fixtures

pytestmark = pytest.mark.spark


def _job_of_two_pipelines(store, workdir: str) -> tuple[Pipeline, str]:
    """A job in the store whose pipeline 2 (its row, its checkpoint directory) runs beside pipeline 1."""
    job = Pipeline(store, workdir)
    second = os.path.join(workdir, job.job_id, "pipeline-2")
    with store.write() as conn:
        conn.execute(insert(s.pipelines).values(
            job_id=job.job_id, incarnation=1, pipeline_id=2, status="RUNNING", fingerprint="f",
            checkpoint_dir=second, rows_read=0, rows_written=0, idle=False))
    return job, second


def _open(job: Pipeline, reporter, sink, spark, pipeline_id: int, directory: str, job_sinks: tuple):
    """A sink of ``pipeline_id`` as its driver opens it (its decisions in the store, the job's door)."""
    plugin_id = f"sink[{pipeline_id - 1}]"
    ctx = SinkContext(spark, job.job_id, pipeline_id, plugin_id, True, True, io.StringIO(), job_sinks=job_sinks)
    run = attempt_run(sink, ctx, commit_log_of(directory, plugin_id, "L"), reporter, routes=None,
                      job_id=job.job_id, pipeline_id=pipeline_id, sink_index=pipeline_id - 1, lineage="L",
                      origin=job.origin)
    run.roll_forward()
    return run


def _second_commits_then_first_drops(spark, job, second_dir, dropping, appending, read) -> list[int]:
    reporter = job.attempt()
    sinks = (dropping, appending)
    appended = _open(job, reporter, appending, spark, 2, second_dir, sinks)
    assert not appended.write(rows(spark, [1, 2, 3]), 0).replayed     # pipeline 2's batch 0: committed
    assert read() == [1, 2, 3]
    first_dir = os.path.join(job.workdir, job.job_id, "pipeline-1")
    try:
        _open(job, reporter, dropping, spark, 1, first_dir, sinks).write(rows(spark, [10]), 0)
    except PermanentError as refused:          # what promise 2 asks: refused, nothing destroyed
        assert "nothing was destroyed" in str(refused)
    # pipeline 2 replays its batch 0 (a restart): it counts it as committed and writes nothing
    assert _open(job, job.attempt(), appending, spark, 2, second_dir, sinks).write(rows(spark, [1, 2, 3]), 0).replayed
    return read()


def _held_while_second_commits(spark, store, tmp_path, monkeypatch, step: str, first, second_sink, read):
    """Pipeline 1 (``first``) runs batch 0 held at failpoint ``step`` while pipeline 2 (``second_sink``)
    commits its batch 0 (ids 1-3); then pipeline 1 goes on. (pipeline 1's outcome, what ``read`` sees
    after it); pipeline 2's replay of batch 0 (a restart) writes nothing: it counts it committed."""
    sinks = (first, second_sink)
    job, second = _job_of_two_pipelines(store, str(tmp_path / "checkpoints"))
    reporter = job.attempt()
    first_dir = os.path.join(job.workdir, job.job_id, "pipeline-1")
    held = Zombie(step, str(tmp_path / "gate"), monkeypatch,
                  lambda: _open(job, reporter, first, spark, 1, first_dir, sinks).write(rows(spark, [10]), 0))
    assert not _open(job, reporter, second_sink, spark, 2, second, sinks).write(rows(spark, [1, 2, 3]), 0).replayed
    assert {1, 2, 3} <= set(read())                        # pipeline 2's batch 0: committed
    outcome = held.release()
    after = read()
    assert _open(job, job.attempt(), second_sink, spark, 2, second, sinks).write(rows(spark, [1, 2, 3]), 0).replayed
    return outcome, after


@pytest.mark.parametrize("inner", [
    pytest.param("", id="same-path-control"),       # the same key: refused at the door, rows kept (passes)
    pytest.param("b", id="path-inside"),      # overlapping keys: refused at the door too (store/target_identity.py)
])
def test_a_file_drop_data_keeps_another_pipelines_rows_in_a_path_inside_its_own(spark, store, tmp_path, inner):
    system = LocalFileSystem(str(tmp_path))
    out = system.new_target()
    theirs = os.path.join(out, inner) if inner else out
    job, second = _job_of_two_pipelines(store, str(tmp_path / "checkpoints"))
    after = _second_commits_then_first_drops(spark, job, second, system.sink(out, data_save_mode="DROP_DATA"),
                                             system.sink(theirs, data_save_mode="APPEND_DATA"),
                                             lambda: system.read(theirs))
    assert after in ([1, 2, 3], [1, 2, 3, 10]), f"pipeline 2's committed rows in {theirs} after pipeline 1's DROP_DATA: {after}"


def test_a_jdbc_drop_data_keeps_another_pipelines_rows_written_by_query(spark, store, tmp_path, mariadb_database):
    system = JdbcSystem("MariaDB", mariadb_database)
    table = system.new_target()
    by_query = JdbcSink(read_options({"url": system.url, "user": system.user,
                                      "query": f"INSERT INTO {table} (id, name) VALUES (?, ?)"}, JdbcSink.options))
    job, second = _job_of_two_pipelines(store, str(tmp_path / "checkpoints"))
    after = _second_commits_then_first_drops(spark, job, second, system.sink(table, data_save_mode="DROP_DATA"),
                                             by_query, lambda: system.read(table))
    assert after == [1, 2, 3] or after == [1, 2, 3, 10], f"table {table} after pipeline 1's DROP_DATA: {after}"


def test_a_jdbc_drop_data_held_before_its_plan_keeps_rows_another_pipeline_committed_meanwhile(
        spark, store, tmp_path, mariadb_database, monkeypatch):
    """One table, two sinks in two pipelines: pipeline 1 DROP_DATA (with batch_size = 500, so the plan
    does not take them for one target), pipeline 2 APPEND_DATA. Pipeline 1's door finds no decision,
    asks may_destroy (nothing kept yet) and is held at ``sink.save_mode_plan``; pipeline 2's door
    decides APPEND_DATA (destroy None, recorded in the store only: save_modes.plan returns before
    its lock and record) and commits batch 0; pipeline 1 goes on: save_modes.plan, under its lock,
    records its decision through the door before the DELETE, finds pipeline 2's standing, and
    destroys nothing (before the fix it DELETEd, then took pipeline 2's decision as standing)."""
    system = JdbcSystem("MariaDB", mariadb_database)
    table = system.new_target()
    outcome, after = _held_while_second_commits(
        spark, store, tmp_path, monkeypatch, "sink.save_mode_plan",
        system.sink(table, data_save_mode="DROP_DATA", batch_size=500),
        system.sink(table, data_save_mode="APPEND_DATA"), lambda: system.read(table))
    refused = isinstance(outcome.get("error"), PermanentError)
    assert after == ([1, 2, 3] if refused else [1, 2, 3, 10]), \
        f"table {table} after pipeline 1's DROP_DATA ({outcome}): {after}; pipeline 2 counts [1, 2, 3] committed"


def test_a_paimon_recreate_keeps_rows_another_pipeline_committed_between_its_decision_and_its_drop(
        spark, store, tmp_path, monkeypatch):
    """One Paimon table, two sinks in two pipelines: pipeline 1 RECREATE_SCHEMA, pipeline 2 APPEND_DATA
    (options spelled apart, or the plan refuses them). Pipeline 1's door decides the recreate of the
    table as it is (kept_output: nothing kept) and is held at ``sink.save_modes_decided``; pipeline 2
    commits batch 0 into that table; pipeline 1 goes on and drops the decided table (drop_if_same:
    still the same table), with pipeline 2's committed rows. Fixed: pipeline 2 (APPEND_DATA) passes
    the door too, finds the recorded recreate and carries it out before its rows; pipeline 1's
    drop then finds the decided table gone."""
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [900])                                  # the table exists before the job
    outcome, after = _held_while_second_commits(
        spark, store, tmp_path, monkeypatch, "sink.save_modes_decided",
        system.sink(table, schema_save_mode="RECREATE_SCHEMA"),
        system.sink(table, data_save_mode="APPEND_DATA"), lambda: system.read(table))
    refused = isinstance(outcome.get("error"), PermanentError)
    assert after == ([1, 2, 3, 900] if refused else [1, 2, 3, 10]), \
        f"table {table} after pipeline 1's RECREATE_SCHEMA ({outcome}): {after}; pipeline 2 counts [1, 2, 3] committed"


def test_a_table_dropped_by_two_sinks_through_two_spellings_of_its_server_is_emptied_once(
        spark, store, tmp_path, mariadb_database):
    system = JdbcSystem("MariaDB", mariadb_database)
    table = system.new_target()
    system.put(table, [900])                            # there before the job: DROP_DATA removes it
    by_name = JdbcSink(read_options({"url": system.url.replace("127.0.0.1", "localhost"), "user": system.user,
                                     "table": table, "data_save_mode": "DROP_DATA"}, JdbcSink.options))
    job, second = _job_of_two_pipelines(store, str(tmp_path / "checkpoints"))
    after = _second_commits_then_first_drops(spark, job, second, system.sink(table, data_save_mode="DROP_DATA"),
                                             by_name, lambda: system.read(table))
    assert after == [1, 2, 3, 10], f"table {table} after pipeline 1's DROP_DATA: {after}"
