"""Jdbc save modes that refuse, or a RECREATE_SCHEMA that could not create its table, refuse before anything is
destroyed (outside review of e20cc14..8348a57).

Was: Jdbc's own ERROR_WHEN_DATA_EXISTS was no check ahead either.

``JdbcTarget.check_ahead`` checks a table's existence (ERROR_WHEN_SCHEMA_NOT_EXIST), columns and keys;
ERROR_WHEN_DATA_EXISTS is decided only in ``save_modes.plan`` at the sink's first batch (save_modes.py:78),
after an earlier sink of the job (here another Jdbc sink) emptied its table with DROP_DATA."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import db, execute, query, routes_writer, txn  # noqa: F401

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string } }"


def test_a_jdbc_sinks_error_when_data_exists_refuses_before_another_jdbc_sinks_drop_data(spark, db, tmp_path):
    from tests.e2e.harness import InProcessCluster

    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    execute(db, f"CREATE TABLE {first} (id BIGINT, name TEXT)", f"INSERT INTO {first} VALUES (-1, 'kept')",
            f"CREATE TABLE {second} (id BIGINT, name TEXT)", f"INSERT INTO {second} VALUES (-2, 'there')")
    url, user = db
    text = f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }} }}
sink {{
  Jdbc {{ plugin_input = "s1", url = "{url}", user = "{user}", table = "{first}", data_save_mode = "DROP_DATA" }}
  Jdbc {{ plugin_input = "s1", url = "{url}", user = "{user}", table = "{second}",
          data_save_mode = "ERROR_WHEN_DATA_EXISTS" }}
}}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "ERROR_WHEN_DATA_EXISTS" in run.error, run.error
    assert (-1, "kept") in query(db, f"SELECT id, name FROM {first}")


def test_recreate_schema_does_not_drop_a_table_it_then_cannot_create(spark, db, tmp_path):
    """RECREATE_SCHEMA: ``save_modes.plan`` runs DROP TABLE (save_modes.py:181) at the sink's first batch;
    ``save_modes.ensure`` then builds the CREATE TABLE (save_modes.py:268) and refuses a field the dialect
    has no column type for (a map: "write it as JSON text"). ``JdbcTarget.check_ahead`` skips a table
    RECREATE_SCHEMA makes anew (target.py:137), so nothing checked it before the drop: the job is refused
    with the user's table gone."""
    from tests.e2e.harness import InProcessCluster

    table = f"t_{secrets.token_hex(3)}_r"
    execute(db, f"CREATE TABLE {table} (id BIGINT, name TEXT)", f"INSERT INTO {table} VALUES (-1, 'kept')")
    url, user = db
    text = f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }} }}
transform {{ Sql {{ plugin_input = "s1", plugin_output = "s2", query = "select id, name, map('k', name) as m from s1" }} }}
sink {{
  Jdbc {{ plugin_input = "s2", url = "{url}", user = "{user}", table = "{table}", schema_save_mode = "RECREATE_SCHEMA" }}
}}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert "column type" in run.error, run.error
    assert query(db, f"SELECT id, name FROM {table}") == [(-1, "kept")]


def _routed(spark, job: str, names: list[str]):
    from tests.connectors.jdbc_sink_helpers import inserts

    tables = {i: inserts(spark, [10 + i]) for i in range(len(names))}
    return TableFrames(tables, {}, {i: df.schema for i, df in tables.items()}.__getitem__)


def test_a_tables_error_when_data_exists_refuses_before_another_table_of_the_sink_is_emptied(spark, db, tmp_path):
    """One multi-table sink driven alone (no runtime check ahead): its first batch looks at b's save modes
    before a's DROP_DATA."""
    job = f"t_{secrets.token_hex(3)}"
    execute(db, f"CREATE TABLE {job}_a (id BIGINT, name TEXT)", f"INSERT INTO {job}_a VALUES (-1, 'kept')",
            f"CREATE TABLE {job}_b (id BIGINT, name TEXT)", f"INSERT INTO {job}_b VALUES (-2, 'there')")
    writer = routes_writer(spark, db, [f"{job}_a", f"{job}_b"], job, data_save_mode="ERROR_WHEN_DATA_EXISTS",
                           per_table={f"{job}_a": {"data_save_mode": "DROP_DATA"}})
    with pytest.raises(JdbcSinkError, match="ERROR_WHEN_DATA_EXISTS"):
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _routed(spark, job, ["a", "b"]), 0, txn(job, 0))
    assert query(db, f"SELECT id, name FROM {job}_a") == [(-1, "kept")]


def test_a_table_whose_error_when_data_exists_another_writer_decided_is_not_refused_ahead(spark, db, tmp_path):
    """Another writer of the job run decided b's save modes while b was empty, then wrote rows into it: a sink
    whose other table is emptied looks at b ahead, finds that decision standing, and writes."""
    job = f"t_{secrets.token_hex(3)}"
    execute(db, f"CREATE TABLE {job}_a (id BIGINT, name TEXT)", f"INSERT INTO {job}_a VALUES (-1, 'kept')",
            f"CREATE TABLE {job}_b (id BIGINT, name TEXT)")
    decisions, run = FileDecisions(SinkCommitLog(str(tmp_path / "store"))), f"S_{job}"
    first = routes_writer(spark, db, [f"{job}_b"], job, data_save_mode="ERROR_WHEN_DATA_EXISTS")
    write_exactly_once(first, SinkCommitLog(str(tmp_path / "first")), _routed(spark, job, ["b"]), 0,
                       txn(job, 0, "L1"), decisions=decisions, save_modes_key=run)
    both = routes_writer(spark, db, [f"{job}_a", f"{job}_b"], job, data_save_mode="ERROR_WHEN_DATA_EXISTS",
                         per_table={f"{job}_a": {"data_save_mode": "DROP_DATA"}})
    write_exactly_once(both, SinkCommitLog(str(tmp_path / "both")), _routed(spark, job, ["a", "b"]), 0,
                       txn(job, 0, "L2"), decisions=decisions, save_modes_key=run)
    assert query(db, f"SELECT id FROM {job}_a") == [(10,)]
    assert sorted(query(db, f"SELECT id FROM {job}_b")) == [(10,), (11,)]
