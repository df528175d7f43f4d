"""Outside review, R-F and R-D: what the Jdbc sink's user may not do is found before anything is destroyed.

R-F: a privilege a multi-table sink's later table lacks was found only at that table's own step, after
an earlier table had been emptied. Every target's needs are asked first (``privileges.lacking``, the one
check ``seatide check --connect`` asks) and the sink is refused naming each missing grant.
R-D: a DDL ``custom_sql`` that LOCK TABLES forbids is refused when the job is loaded; a step the server
refuses for good (syntax, privilege) ends the attempt as a configuration error, never a retry.
Real MariaDB and PostgreSQL, users with exactly the grants each case needs."""

from __future__ import annotations

import contextlib
import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from seatide.runtime.failures import describe_error
from tests.connectors.jdbc_sink_helpers import db, execute, frame, query, routes_writer, txn  # noqa: F401 - db
from tests.connectors.test_jdbc_sink_privileges import (  # noqa: F401 - fixtures
    _admin, _check, _mariadb_user, _opened_target, _pg_admin, _pg_role, _rows, locking_user)


@contextlib.contextmanager
def _deletes_only_the_first(server: str, first: str, second: str):
    """A user who may write both tables and empty only ``first`` (DELETE on it alone), both tables made
    with two rows: ((url, user), password)."""
    if server == "mariadb":
        with _mariadb_user("SELECT, INSERT, UPDATE, CREATE, DROP, INDEX, ALTER", "`DB`.*") as (db, password):
            database = db[0].rsplit("/", 1)[1]
            _admin(*(f"CREATE TABLE {database}.{t} (id BIGINT, name TEXT)" for t in (first, second)),
                   *(f"INSERT INTO {database}.{t} VALUES (1, 'kept'), (2, 'kept')" for t in (first, second)),
                   # the sink's commit records, made here so that DELETE may be granted on them alone
                   f"CREATE TABLE {database}.seatide_sink_commits (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                   "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                   "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
                   f"GRANT DELETE ON {database}.{first} TO '{db[1]}'@'%'",
                   f"GRANT DELETE ON {database}.seatide_sink_commits TO '{db[1]}'@'%'")
            yield db, password
        return
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                  *(f"CREATE TABLE {t} (id BIGINT, name TEXT)" for t in (first, second)),
                  *(f"INSERT INTO {t} VALUES (1, 'kept'), (2, 'kept')" for t in (first, second)),
                  f"GRANT SELECT, INSERT, UPDATE ON {first}, {second} TO {role}",
                  f"GRANT DELETE ON {first} TO {role}")
        yield (f"jdbc:postgresql://127.0.0.1:5432/{database}", role), "pw"


@pytest.mark.parametrize("server", ["mariadb", "postgresql"])
def test_a_later_tables_missing_grant_refuses_the_sink_before_an_earlier_table_is_emptied(spark, server, tmp_path):
    """R-F: DROP_DATA on two tables, the user may DELETE from the first only. Before, the first was
    emptied and the second's DELETE failed with the server's raw error; now the sink is refused before
    either is touched, naming the table, the privilege and the GRANT to run."""
    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    with _deletes_only_the_first(server, first, second) as (db, password):
        writer = routes_writer(spark, db, [first, second], job, password=password, data_save_mode="DROP_DATA")
        tables = {i: frame(spark, [(10 + i, "new", RowKind.INSERT)], "id bigint, name string") for i in range(2)}
        frames = TableFrames(tables, {}, {i: df.schema for i, df in tables.items()}.__getitem__,
                             local={i: [tuple(r) for r in df.collect()] for i, df in tables.items()})
        with pytest.raises(JdbcSinkError) as refused:
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), frames, 0, txn(job, 0))
        message = str(refused.value)
        assert f"{second}: DELETE" in message and "GRANT DELETE ON" in message, message
        assert f"{first}:" not in message and "Nothing was checked or destroyed" in message, message
        for table in (first, second):
            assert _rows(db, password, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "kept"), (2, "kept")]


@pytest.mark.parametrize("custom_sql", ["RENAME TABLE t TO t_old", "CREATE TABLE t_copy LIKE t",
                                        "TRUNCATE TABLE other", "TRUNCATE TABLE t; TRUNCATE TABLE other",
                                        "ALTER TABLE t RENAME TO t_old", "DROP TABLE t, other"])
def test_a_ddl_custom_sql_that_lock_tables_forbids_is_refused_when_the_job_is_loaded(
        locking_user, tmp_path, capsys, custom_sql):
    """R-D: such a statement failed with the server's raw error (1192, 1100, 1064) after the decision was
    recorded, retried to the same error. Now the job is invalid: the statement is named, and why."""
    db, password = locking_user
    code, report = _check(tmp_path, capsys, db, password, data_save_mode="CUSTOM_PROCESSING", custom_sql=custom_sql)
    assert code == 2 and not report["valid"], report
    assert "custom_sql" in report["error"] and custom_sql.split(" ")[0] in report["error"], report
    assert "LOCK TABLES" in report["error"], report


def test_the_statements_lock_tables_lets_run_on_the_target_are_accepted(locking_user, tmp_path, capsys):
    db, password = locking_user
    for custom_sql in ("TRUNCATE TABLE t", "-- empty\\nTRUNCATE `t`;", "ALTER TABLE t ADD COLUMN x INT",
                       "DROP TABLE IF EXISTS t", "CREATE INDEX ix ON t (id)", "DROP INDEX ix ON t",
                       f"TRUNCATE TABLE {db[0].rsplit('/', 1)[1]}.t", "DELETE FROM t WHERE id < 0"):
        code, report = _check(tmp_path, capsys, db, password, data_save_mode="CUSTOM_PROCESSING",
                              custom_sql=custom_sql)
        assert code == 0, (custom_sql, report)


def test_a_custom_sql_the_server_refuses_ends_the_attempt_as_a_configuration_error(db):  # noqa: F811
    """R-D: a syntax error (1064, PostgreSQL 42601) after the decision was the server's raw error,
    retried to the same end; now a configuration error naming the statement, and the table keeps its rows."""
    table = f"t_{secrets.token_hex(3)}"
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY)", f"INSERT INTO {table} VALUES (1), (2)")
    custom_sql = f"ALTER TABLE {table} ADD COLUMN"      # taken for DDL on MariaDB: run locked, after the decision
    target = _opened_target(db, "", table, data_save_mode="CUSTOM_PROCESSING", custom_sql=custom_sql)
    with pytest.raises(JdbcSinkError) as refused:
        target.save_mode_plan(None)
    message, permanent = describe_error(refused.value)
    assert permanent and custom_sql in message and "no retry" in message, message
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
