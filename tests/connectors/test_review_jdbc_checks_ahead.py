"""Outside review of the job's checks ahead (d8fee31..3e07f3c): what it showed, each now held.

1. ``lenient`` is the CDC sources' default ``schema.change.behavior`` (cdc_evolution.DEFAULT_BEHAVIOUR),
   and the change made ALTER (on PostgreSQL: owning the table) a required grant for it at the first
   batch, for every table not yet written, whether or not its save modes destroy anything and whether
   or not a change ever comes. A CDC job appending into a table its role may write but does not own
   ran before; now it is refused before its first row (a false refusal).
2. A pipeline that fails at ``PipelineRun.open`` (its source cannot be read) is left out of
   ``check_sinks_ahead``, and the job's other pipeline goes on: its DROP_DATA empties its table for a
   job that is then FAILED.
3. Only Jdbc targets say they destroy: a LocalFile (Paimon, Iceberg, Hive) DROP_DATA empties its
   directory before the job's Jdbc sink is checked.
4. The checks ahead run before ``evolve`` hands the sink its behaviour: a lenient sink is refused a
   column its first batch accepts."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pytest

from seatide.plugin.rowkind import RowKind
from seatide.plugin.sink_protocol import open_sink
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import context, db, execute, frame, make_sink, query, txn  # noqa: F401
from tests.connectors.test_jdbc_sink_privileges import _pg_admin, _pg_role, _rows

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string } }"


def test_a_cdc_jobs_default_lenient_behaviour_does_not_refuse_an_appending_role_that_does_not_own_the_table(
        spark, tmp_path):
    """APPEND_DATA (nothing destroyed), the default ``lenient`` a Postgres-CDC/MySQL-CDC source hands its
    sinks, a role with SELECT/INSERT/UPDATE/DELETE on a table postgres owns: the rows are written (a later
    change the role cannot make fails at that change, as before), not a refusal asking for OWNER TO."""
    job = f"t_{secrets.token_hex(3)}"
    table = f"{job}_a"
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                  f"CREATE TABLE {table} (id BIGINT, name TEXT)", f"INSERT INTO {table} VALUES (-1, 'kept')",
                  f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role}")
        db = (f"jdbc:postgresql://127.0.0.1:5432/{database}", role)
        sink = make_sink(db, table=table, password="pw")           # APPEND_DATA: destroys nothing
        writer = open_sink(sink, replace(context(spark, job), schema_changes="lenient"))
        rows = frame(spark, [(1, "new", RowKind.INSERT)], "id bigint, name string")
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), rows, 0, txn(job, 0))
        assert _rows(db, "pw", f"SELECT id, name FROM {table} ORDER BY id") == [(-1, "kept"), (1, "new")]


def test_a_pipeline_that_fails_to_open_fails_the_job_before_another_pipelines_drop_data(spark, db, tmp_path):
    """Pipeline 1 empties its table (DROP_DATA); pipeline 2 is refused at ``open`` (its checkpoint
    directory holds another pipeline's ``seatide.json``: "written for different sources", a PermanentError
    of ``claim_pipeline_dir``), before the checks ahead, which leave it out. The job fails; pipeline 1's
    table must keep its rows: the refusal was known before the first destructive step."""
    import json
    import os

    from sqlalchemy import select

    from seatide.store import schema as s
    from tests.e2e.harness import InProcessCluster

    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    execute(db, f"CREATE TABLE {first} (id BIGINT, name TEXT)", f"INSERT INTO {first} VALUES (-1, 'kept')",
            f"CREATE TABLE {second} (id BIGINT, name TEXT)")
    url, user = db
    text = f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{
  FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }}
  FakeSource {{ plugin_output = "s2", row.num = 3, sequence.field = "id", {FIELDS} }}
}}
sink {{
  Jdbc {{ plugin_input = "s1", url = "{url}", user = "{user}", table = "{first}", data_save_mode = "DROP_DATA" }}
  Jdbc {{ plugin_input = "s2", url = "{url}", user = "{user}", table = "{second}" }}
}}
"""
    cluster = InProcessCluster(spark, str(tmp_path / "data"))
    job_id = cluster.submit(text)
    with cluster.store.read() as conn:
        rows = list(conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == job_id)))
    refused = next(r for r in rows if r.pipeline_id == 2)
    os.makedirs(refused.checkpoint_dir, exist_ok=True)
    with open(os.path.join(refused.checkpoint_dir, "seatide.json"), "w") as out:
        json.dump({"lineage": "other", "fingerprint": "written-for-other-sources", "job_id": job_id,
                   "pipeline_id": 2}, out)
    run = cluster.drive(job_id, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "pipeline 2" in run.error, run.error
    assert query(db, f"SELECT id, name FROM {first}") == [(-1, "kept")]


@pytest.mark.parametrize("pipelines", [1, 2], ids=["one-pipeline", "two-pipelines"])
def test_a_file_sinks_drop_data_waits_for_the_jdbc_sinks_checks_ahead(spark, db, tmp_path, pipelines):
    """LocalFile (also Paimon, Iceberg, Hive) carries out DROP_DATA, but only Jdbc targets say they
    destroy (``Target.destroys_when_planned``): ``check_sinks_ahead`` sees nothing destroy, and the Jdbc
    sink's table (without the input's column ``name``) is checked only before its own first rows, after
    the file sink emptied its directory. The job must fail with the directory's file kept."""
    from tests.e2e.harness import InProcessCluster, fake_sources_job

    job = f"t_{secrets.token_hex(3)}"
    execute(db, f"CREATE TABLE {job}_b (id BIGINT)")
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.json").write_text('{"id": -1, "name": "kept"}\n')
    url, user = db
    second = "s1" if pipelines == 1 else "s2"
    text = fake_sources_job(f"""
  LocalFile {{ plugin_input = "s1", path = "{out}", file_format_type = "json", data_save_mode = "DROP_DATA" }}
  Jdbc {{ plugin_input = "{second}", url = "{url}", user = "{user}", table = "{job}_b" }}""", pipelines)
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert f"{job}_b has no column name" in run.error, run.error
    assert (out / "kept.json").exists(), sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize("checked_ahead", [False, True], ids=["first-batch-only", "driver-order"])
def test_a_lenient_sinks_checks_ahead_come_after_the_behaviour_is_handed_to_it(spark, db, tmp_path, checked_ahead):
    """The driver now runs ``check_sinks_ahead`` at ``open``, before ``start`` hands each sink the sources'
    behaviour (``schema_evolution.evolve``): ``JdbcTarget.check`` still has ``behaviour`` None and refuses
    a column the table lacks, which under ``lenient``/``evolve`` the same check tolerates once handed
    the behaviour (the first batch's own check, as before the change). DROP_DATA (the sink destroys,
    so its checks ahead run) into a table without the CDC source's column ``name``: the order the
    driver uses must not refuse what the first batch accepts."""
    job = f"t_{secrets.token_hex(3)}"
    table = f"{job}_a"
    execute(db, f"CREATE TABLE {table} (id BIGINT)", f"INSERT INTO {table} VALUES (-1)")
    sink = make_sink(db, table=table, data_save_mode="DROP_DATA")
    writer = open_sink(sink, replace(context(spark, job), schema_changes="lenient"))
    rows = frame(spark, [(1, "new", RowKind.INSERT)], "id bigint, name string")
    if checked_ahead:
        from seatide.plugin.tables import table_frames_of
        # driver.check_sinks_ahead -> SinkRun.check_ahead -> SinkTargets.check_ahead, at PipelineRun.open
        writer.check_ahead(table_frames_of(rows), {})
    writer.evolve([], "lenient")            # PipelineRun.start: schema_evolution.evolve, no change pending
    write_exactly_once(writer, SinkCommitLog(str(tmp_path)), rows, 0, txn(job, 0))
    assert (1,) in [r[:1] for r in query(db, f"SELECT id FROM {table}")]
