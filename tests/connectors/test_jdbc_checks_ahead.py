"""Outside review of the Jdbc sink, #4: checks made only after the destructive step. Every check that
needs no save mode made first (the table exists where required, the input's columns fit, an upsert's
key has a unique index) runs for every target of the sink before the first target is emptied.
Real PostgreSQL (127.0.0.1:5432 db test), superuser."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.rowkind import RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import execute, frame, query, routes_writer, txn

DB = ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")


@pytest.fixture
def job():
    name = f"t_{secrets.token_hex(3)}"
    yield name
    execute(DB, f"DROP TABLE IF EXISTS {name}_a", f"DROP TABLE IF EXISTS {name}_b")


def _kept(table: str) -> list[tuple]:
    return query(DB, f"SELECT id, name FROM {table} ORDER BY id")


def test_drop_data_on_an_upsert_whose_table_has_no_unique_key_refuses_before_the_table_is_emptied(spark, job, tmp_path):
    execute(DB, f"CREATE TABLE {job}_a (id BIGINT, name TEXT)", f"INSERT INTO {job}_a VALUES (1, 'kept')")
    writer = routes_writer(spark, DB, [f"{job}_a"], job, data_save_mode="DROP_DATA", primary_keys=["id"],
                           enable_upsert=True)
    df = frame(spark, [(10, "new", RowKind.INSERT)], "id bigint, name string")
    with pytest.raises(JdbcSinkError, match="no primary key or unique index on"):
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), TableFrames({0: df}, {}, {0: df.schema}.__getitem__),
                           0, txn(job, 0))
    assert _kept(f"{job}_a") == [(1, "kept")]


def test_a_later_tables_missing_column_refuses_before_an_earlier_table_is_emptied(spark, job, tmp_path):
    execute(DB, f"CREATE TABLE {job}_a (id BIGINT, name TEXT)", f"INSERT INTO {job}_a VALUES (1, 'kept')",
            f"CREATE TABLE {job}_b (id BIGINT)")
    writer = routes_writer(spark, DB, [f"{job}_a", f"{job}_b"], job, data_save_mode="DROP_DATA")
    tables = {i: frame(spark, [(10 + i, "new", RowKind.INSERT)], "id bigint, name string") for i in range(2)}
    frames = TableFrames(tables, {}, {i: df.schema for i, df in tables.items()}.__getitem__)
    with pytest.raises(JdbcSinkError, match=f"table {job}_b has no column name"):
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), frames, 0, txn(job, 0))
    assert _kept(f"{job}_a") == [(1, "kept")]


def test_recreate_schema_does_not_check_the_table_it_makes_anew(spark, job, tmp_path):
    """A table RECREATE_SCHEMA drops and makes from the input is not checked against the old one."""
    execute(DB, f"CREATE TABLE {job}_a (id BIGINT)")
    writer = routes_writer(spark, DB, [f"{job}_a"], job, schema_save_mode="RECREATE_SCHEMA")
    df = frame(spark, [(10, "new", RowKind.INSERT)], "id bigint, name string")
    write_exactly_once(writer, SinkCommitLog(str(tmp_path)), TableFrames({0: df}, {}, {0: df.schema}.__getitem__),
                       0, txn(job, 0))
    assert _kept(f"{job}_a") == [(10, "new")]
