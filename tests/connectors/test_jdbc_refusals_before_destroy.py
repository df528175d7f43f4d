"""The Jdbc sink refuses before it destroys, and refuses no job it can run (outside review of 1736096, 960fd7e,
b8cf721, be5895f; these tests failed before its fixes): privileges, checks ahead, the pinned schema. Real MariaDB and PostgreSQL."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.rowkind import RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import frame, routes_writer, txn
from tests.connectors.test_jdbc_privileges_asked_first import _deletes_only_the_first
from tests.connectors.test_jdbc_sink_privileges import _admin, _check, _mariadb_user, _pg_admin, _pg_role, _rows


def _two_tables(spark, ids=(10, 11)):
    tables = {i: frame(spark, [(ids[i], "new", RowKind.INSERT)], "id bigint, name string") for i in range(2)}
    return TableFrames(tables, {}, {i: df.schema for i, df in tables.items()}.__getitem__,
                       local={i: [tuple(r) for r in df.collect()] for i, df in tables.items()})


@pytest.mark.parametrize("server", ["mariadb", "postgresql"])
def test_a_later_tables_custom_sql_it_may_not_run_refuses_before_an_earlier_table_is_emptied(spark, server, tmp_path):
    """R-F's case with CUSTOM_PROCESSING instead of DROP_DATA: a DML custom_sql (both servers) asks no
    privilege of the server first, so the first table's DELETE runs and commits, then the second's fails."""
    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    with _deletes_only_the_first(server, first, second) as (db, password):
        per_table = {t: {"custom_sql": f"DELETE FROM {t}"} for t in (first, second)}
        writer = routes_writer(spark, db, [first, second], job, per_table=per_table, password=password,
                               data_save_mode="CUSTOM_PROCESSING")
        with pytest.raises(Exception) as refused:
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _two_tables(spark), 0, txn(job, 0))
        print("REFUSED:", type(refused.value).__name__, str(refused.value)[:300])
        kept = {t: _rows(db, password, f"SELECT id, name FROM {t} ORDER BY id") for t in (first, second)}
        assert kept == {t: [(1, "kept"), (2, "kept")] for t in (first, second)}


def test_postgresql_multi_table_commit_records_home_is_not_asked_and_the_tables_are_emptied_first(spark, tmp_path):
    """PostgreSQL 15: a role may create in schema ``a`` (its tables' schema) but not in ``public``. A
    multi-table sink keeps its commit records in the pinned current_schema() (public), which
    _refuse_lacking never asks: DROP_DATA empties both tables, then the first batch fails to make
    public.seatide_sink_commits (raw 42501), at every attempt."""
    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    with _pg_role() as (database, role):
        _pg_admin(database, "CREATE SCHEMA a", f"GRANT USAGE, CREATE ON SCHEMA a TO {role}",
                  *(f"CREATE TABLE a.{t} (id BIGINT, name TEXT)" for t in (first, second)),
                  *(f"INSERT INTO a.{t} VALUES (1, 'kept'), (2, 'kept')" for t in (first, second)),
                  *(f"GRANT SELECT, INSERT, UPDATE, DELETE ON a.{t} TO {role}" for t in (first, second)))
        db = (f"jdbc:postgresql://127.0.0.1:5432/{database}", role)
        per_table = {t: {"table": f"a.{t}"} for t in (first, second)}
        writer = routes_writer(spark, db, [first, second], job, per_table=per_table, password="pw",
                               data_save_mode="DROP_DATA")
        try:
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _two_tables(spark), 0, txn(job, 0))
            outcome = "ran"
        except Exception as exc:            # noqa: BLE001 - what it was is printed
            outcome = f"{type(exc).__module__}.{type(exc).__name__}: {str(exc)[:200]}"
        print("OUTCOME:", outcome)
        kept = {t: _rows(db, "pw", f"SELECT id FROM a.{t} ORDER BY id") for t in (first, second)}
        # either it runs (both tables hold the new row) or it is refused with the rows kept
        assert kept in ({first: [(10,)], second: [(11,)]}, {first: [(1,), (2,)], second: [(1,), (2,)]}), \
            (outcome, kept)


def test_mariadb_multi_table_is_refused_for_delete_on_commit_records_in_the_targets_database(spark, tmp_path):
    """False refusal: a multi-table sink's commit records live in the URL's database, where the user
    has every privilege; its tables live in another database, where it may SELECT, INSERT, CREATE,
    DROP (APPEND_DATA). The check asks UPDATE and DELETE on `other`.seatide_sink_commits instead and
    refuses a job that runs."""
    job = f"t_{secrets.token_hex(3)}"
    other = f"other_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    with _mariadb_user("ALL PRIVILEGES", "`DB`.*") as (db, password):
        _admin(f"CREATE DATABASE {other}",
               f"GRANT SELECT, INSERT, CREATE, DROP, INDEX, ALTER ON {other}.* TO '{db[1]}'@'%'")
        try:
            per_table = {t: {"table": f"{other}.{t}"} for t in (first, second)}
            writer = routes_writer(spark, db, [first, second], job, per_table=per_table, password=password)
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _two_tables(spark), 0, txn(job, 0))
            assert _rows(db, password, f"SELECT id FROM {other}.{first}") == [(10,)]
        finally:
            _admin(f"DROP DATABASE IF EXISTS {other}")


def test_a_truncate_of_the_target_in_the_database_option_is_not_refused(tmp_path, capsys):
    """False refusal: a single-table MariaDB sink with option 'database' connects to that database, and
    its LOCK TABLES and custom_sql name the table there; 'TRUNCATE TABLE t' is refused at load
    ('t unqualified is looked up in the connection's database') though it runs on the target."""
    with _mariadb_user("ALL PRIVILEGES", "*.*") as (db, password):
        other = f"other_{secrets.token_hex(3)}"
        _admin(f"CREATE DATABASE {other}", f"CREATE TABLE {other}.t (id BIGINT)")
        try:
            code, report = _check(tmp_path, capsys, db, password, database=other,
                                  data_save_mode="CUSTOM_PROCESSING", custom_sql="TRUNCATE TABLE t")
        finally:
            _admin(f"DROP DATABASE IF EXISTS {other}")
    assert code == 0, report["error"]


def test_drop_data_empties_a_table_the_first_batch_then_refuses_for_a_missing_column(spark, tmp_path):
    """Promise 2: DROP_DATA runs before the route's check that the table fits its fields; a table without
    one of the input's columns is emptied, then the batch is refused (PostgreSQL, superuser)."""
    job = f"t_{secrets.token_hex(3)}"
    db = ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")
    _pg_admin("test", f"CREATE TABLE {job}_a (id BIGINT, name TEXT)", f"INSERT INTO {job}_a VALUES (1, 'kept')")
    try:
        writer = routes_writer(spark, db, [f"{job}_a"], job, data_save_mode="DROP_DATA")
        df = frame(spark, [(10, "new", 5, RowKind.INSERT)], "id bigint, name string, extra int")
        frames = TableFrames({0: df}, {}, {0: df.schema}.__getitem__)
        with pytest.raises(JdbcSinkError, match="no column extra"):
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), frames, 0, txn(job, 0))
        assert _rows(db, "", f"SELECT id FROM {job}_a") == [(1,)]
    finally:
        _pg_admin("test", f"DROP TABLE IF EXISTS {job}_a", "DROP TABLE IF EXISTS seatide_sink_commits_x")


from tests.connectors.test_jdbc_search_path_keys import _ids_in, pg, query_sink_over_public_orders, store  # noqa: E402,F401
from tests.connectors.jdbc_sink_helpers import execute, make_sink  # noqa: E402
from tests.contract.harness import Pipeline, rows  # noqa: E402


@pytest.mark.spark
def test_a_query_sinks_later_attempt_inserts_where_its_pinned_key_and_records_are(spark, pg, store, tmp_path):
    """b8cf721/be5895f pin a query sink's key and commit records in the schema its first attempt resolved
    (public), but the query's own 'INSERT INTO orders' still follows the search_path: once 'own.orders'
    exists (own first on the role's search_path), attempt 2 writes batch 1 there, beside a key, records
    and overlap checks that name public.orders."""
    url, role = pg
    sink = query_sink_over_public_orders(pg)

    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    pipeline.open(pipeline.attempt(), sink(), spark).write(rows(spark, [1]), 0)
    execute((url, "postgres"), "CREATE SCHEMA own", "CREATE TABLE own.orders (id BIGINT, name TEXT)",
            f"GRANT ALL ON SCHEMA own TO {role}", f"GRANT ALL ON own.orders TO {role}")
    run = pipeline.open(pipeline.attempt(), sink(), spark)
    run.write(rows(spark, [2]), 1)
    assert [k.rsplit("/", 2)[-2] for k in run.targets.keys()] == ["public"]
    assert {s: _ids_in(url, s) for s in ("public", "own")} == {"public": [1, 2], "own": []}


def test_a_user_granted_a_role_it_has_not_enabled_still_runs_on_its_own_grants(spark, tmp_path):
    """960fd7e asks every sink's privileges at its first batch: the MariaDB user's grants are read with
    SHOW GRANTS FOR each role granted to it. For a role granted but not enabled (no DEFAULT ROLE) the
    server answers 1044 (access denied to database 'mysql'): a user whose own grants suffice fails."""
    job, role = f"t_{secrets.token_hex(3)}", f"r_{secrets.token_hex(3)}"
    with _mariadb_user("ALL PRIVILEGES", "`DB`.*") as (db, password):
        _admin(f"CREATE ROLE {role}", f"GRANT {role} TO '{db[1]}'@'%'")
        try:
            writer = routes_writer(spark, db, [f"{job}_a", f"{job}_b"], job, password=password)
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _two_tables(spark), 0, txn(job, 0))
            assert _rows(db, password, f"SELECT id FROM {job}_a") == [(10,)]
        finally:
            _admin(f"DROP ROLE IF EXISTS {role}")


@pytest.mark.spark
def test_a_run_recorded_by_the_previous_release_replays_its_committed_batch_where_it_committed_it(
        spark, pg, store, tmp_path, monkeypatch):
    """Promise 4: the previous release committed batch 0 into public.orders and its driver died before its
    log heard of it (no pin: that release made none); 'own' (first on the role's search_path) is made
    before the upgraded SeaTide resumes. The resume pins 'own', misses the record in public and applies
    batch 0 again into own.orders, though the run's checkpoint state names public's key."""
    from sqlalchemy import and_, delete

    from seatide import failpoints
    from seatide.connectors.jdbc.target_names import PINNED_SCHEMA
    from seatide.store import schema as s

    url, role = pg
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [1]), 0)
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):
        pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [2]), 1)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    with store.write() as conn:       # as the previous release left the run: no pin
        conn.execute(delete(s.sink_manifests).where(and_(s.sink_manifests.c.job_id == pipeline.job_id,
                                                         s.sink_manifests.c.transaction_id.like(f"{PINNED_SCHEMA}@%"))))
    execute((url, "postgres"), "CREATE SCHEMA own")
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [2]), 1)
    assert {s_: _ids_in(url, s_) for s_ in ("public", "own")} == {"public": [1, 2], "own": None}


def test_a_later_missing_table_refuses_before_an_earlier_table_is_emptied(spark, tmp_path):
    """R-F's shape with ERROR_WHEN_SCHEMA_NOT_EXIST: the second table does not exist, which its own
    ``ensure`` refuses only after the first table's DROP_DATA committed (MariaDB, all privileges)."""
    job = f"t_{secrets.token_hex(3)}"
    with _mariadb_user("ALL PRIVILEGES", "`DB`.*") as (db, password):
        database = db[0].rsplit("/", 1)[1]
        _admin(f"CREATE TABLE {database}.{job}_a (id BIGINT, name TEXT)",
               f"INSERT INTO {database}.{job}_a VALUES (1, 'kept')")
        writer = routes_writer(spark, db, [f"{job}_a", f"{job}_b"], job, password=password,
                               schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST", data_save_mode="DROP_DATA")
        with pytest.raises(JdbcSinkError, match="does not exist"):
            write_exactly_once(writer, SinkCommitLog(str(tmp_path)), _two_tables(spark), 0, txn(job, 0))
        assert _rows(db, password, f"SELECT id, name FROM {job}_a") == [(1, "kept")]


@pytest.mark.parametrize("server", ["mariadb", "postgresql"])
def test_drop_data_the_server_refuses_for_a_foreign_key_is_a_configuration_error_not_a_retry(server):
    """R-D's promise for a step the server refuses for good: DROP_DATA on a table another table's rows
    reference (MariaDB 1451, PostgreSQL 23503) fails every attempt alike, yet it is not classified
    (``refused_for_good`` knows neither), so it is retried to the same raw error."""
    from seatide.runtime.failures import describe_error
    from tests.connectors.jdbc_sink_helpers import execute
    from tests.connectors.test_jdbc_sink_privileges import _opened_target

    db = ("jdbc:mariadb://127.0.0.1:3306/test", "root") if server == "mariadb" else \
        ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")
    parent = f"t_{secrets.token_hex(3)}"
    execute(db, f"CREATE TABLE {parent} (id BIGINT PRIMARY KEY)", f"INSERT INTO {parent} VALUES (1)",
            f"CREATE TABLE {parent}_child (pid BIGINT, FOREIGN KEY (pid) REFERENCES {parent} (id))",
            f"INSERT INTO {parent}_child VALUES (1)")
    try:
        target = _opened_target(db, "", parent, data_save_mode="DROP_DATA")
        with pytest.raises(Exception) as refused:
            target.save_mode_plan(None)
        message, permanent = describe_error(refused.value)
        assert permanent, message
    finally:
        execute(db, f"DROP TABLE IF EXISTS {parent}_child", f"DROP TABLE IF EXISTS {parent}")
