"""Jdbc sink users with SeaTunnel's documented privileges and fewer (issue 32), real users of real
servers: a MariaDB user with SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX and ALTER (no
CREATE TEMPORARY TABLES) runs a job; ``seatide check --connect`` names what a user lacks."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets

import pytest

from seatide.cli.check import check_job
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.rowkind import RowKind
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from tests.connectors.jdbc_sink_helpers import frame, routes_writer, txn

ADMIN = "jdbc:mariadb://127.0.0.1:3306/test"
SEATUNNEL_SINK_GRANTS = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER"


def _admin(*statements: str) -> None:
    conn = JdbcUrl.parse(ADMIN).connect("root", autocommit=True)
    try:
        for sql in statements:
            conn.cursor().execute(sql)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def seatunnel_user():
    """A database and a user with exactly SeaTunnel's sink privileges, on *.* as its test grants them:
    ((url, user), password)."""
    with _mariadb_user(SEATUNNEL_SINK_GRANTS, "*.*") as made:
        yield made


@pytest.fixture(scope="module")
def locking_user():
    """SeaTunnel's sink privileges and LOCK TABLES, which RECREATE_SCHEMA and a DDL custom_sql need on MariaDB."""
    with _mariadb_user(SEATUNNEL_SINK_GRANTS + ", LOCK TABLES", "*.*") as made:
        yield made


@contextlib.contextmanager
def _mariadb_user(grants: str, on: str):
    name, user, password = f"jdbc_priv_{secrets.token_hex(3)}", f"st_sink_{secrets.token_hex(3)}", "st-pw"
    _admin(f"CREATE DATABASE {name}", f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
           f"GRANT {grants} ON {on.replace('DB', name)} TO '{user}'@'%'")
    try:
        yield (f"jdbc:mariadb://127.0.0.1:3306/{name}", user), password
    finally:
        _admin(f"DROP USER IF EXISTS '{user}'@'%'", f"DROP DATABASE IF EXISTS {name}")


def _rows(db, password: str, sql: str) -> list[tuple]:
    url, user = db
    conn = JdbcUrl.parse(url).connect(user, password)
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        return [tuple(r) for r in cursor.fetchall()]
    finally:
        conn.close()


@pytest.fixture(params=["mariadb", "postgresql"])
def no_temporary_tables(request, seatunnel_user):
    """A user who may not create temporary tables: SeaTunnel's MariaDB sink user, or a PostgreSQL
    role that may create in its database's schema public but not TEMPORARY tables."""
    if request.param == "mariadb":
        yield seatunnel_user
        return
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                  f"REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC")
        yield (f"jdbc:postgresql://127.0.0.1:5432/{database}", role), "pw"


@contextlib.contextmanager
def _pg_role():
    role, database = f"sink_{secrets.token_hex(3)}", f"jdbc_priv_{secrets.token_hex(3)}"
    _pg_admin("test", f"CREATE DATABASE {database}", f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    try:
        yield database, role
    finally:
        _pg_admin("test", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", f"DROP ROLE IF EXISTS {role}")


def _pg_admin(database: str, *statements: str) -> None:
    conn = JdbcUrl.parse(f"jdbc:postgresql://127.0.0.1:5432/{database}").connect("postgres", autocommit=True)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


def test_a_user_without_create_temporary_tables_stages_into_ordinary_tables_and_says_so_once(
        spark, no_temporary_tables, tmp_path, caplog):
    """SeaTunnel's mysqlcdc_to_mysql_with_multi_table_mode_two_table failed with 1044 "Access denied
    ... to database": the small batches collected on the driver were staged into temporary tables.
    Without that privilege they stage into ordinary ones, and the log says so once."""
    db, password = no_temporary_tables
    job = f"t_{secrets.token_hex(3)}"
    writer = routes_writer(spark, db, [f"{job}_a", f"{job}_b"], job, primary_keys=["id"], password=password)
    caplog.set_level(logging.INFO, logger="seatide.connectors.jdbc")
    for batch in range(2):
        tables = {i: frame(spark, [(batch * 10 + i, f"r{batch}", RowKind.INSERT)], "id bigint, name string")
                  for i in range(2)}
        schemas = {i: df.schema for i, df in tables.items()}
        local = {i: [tuple(r) for r in df.collect()] for i, df in tables.items()}
        frames = TableFrames(tables, {}, schemas.__getitem__, local=local)
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), frames, batch, txn(job, batch))
    assert _rows(db, password, f"SELECT id FROM {job}_a ORDER BY id") == [(0,), (10,)]
    assert _rows(db, password, f"SELECT id FROM {job}_b ORDER BY id") == [(1,), (11,)]
    said = [r.getMessage() for r in caplog.records if "may not create temporary tables" in r.getMessage()]
    assert len(said) == 1, said
    here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
    assert _rows(db, password, "SELECT table_name FROM information_schema.tables WHERE "
                               f"table_schema = {here} AND table_name LIKE 'seatide_stage%'") == []


def _check(tmp_path, capsys, db, password: str, **sink) -> tuple[int, dict]:
    url, user = db
    options = "".join(f', {k} = "{v}"' for k, v in sink.items())
    job = tmp_path / "job.conf"
    job.write_text(f"""
source {{ FakeSource {{ row.num = 1, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Jdbc {{ url = "{url}", user = "{user}", password = "{password}", table = "t"{options} }} }}
""")
    code = check_job(str(job), {}, as_json=True, connect=True)
    return code, json.loads(capsys.readouterr().out)


def test_check_passes_seatunnels_user_and_names_the_privilege_it_does_without(seatunnel_user, tmp_path, capsys):
    db, password = seatunnel_user
    code, report = _check(tmp_path, capsys, db, password, data_save_mode="DROP_DATA")
    assert code == 0, report
    assert [(p["privilege"], p["required"]) for p in report["privileges"]] == [("CREATE TEMPORARY TABLES", False)]


def test_check_asks_lock_tables_of_recreate_schema_and_of_a_ddl_custom_sql(seatunnel_user, tmp_path, capsys):
    """Outside review of 4f9f607: both steps commit at once on MariaDB and run with the table locked; a job
    whose user may not lock is refused before anything is checked or destroyed, so the check fails it."""
    db, password = seatunnel_user
    for sink, why in (({"schema_save_mode": "RECREATE_SCHEMA"}, "RECREATE_SCHEMA's DROP TABLE commits at once"),
                      ({"data_save_mode": "CUSTOM_PROCESSING", "custom_sql": "-- empty it\\nTRUNCATE TABLE t"},
                       "custom_sql is DDL")):
        code, report = _check(tmp_path, capsys, db, password, **sink)
        lacking = {p["privilege"]: p for p in report["privileges"]}
        assert code == 1 and lacking["LOCK TABLES"]["required"] and why in lacking["LOCK TABLES"]["why"], report


def test_check_names_each_privilege_a_user_lacks_and_what_needs_it(tmp_path, capsys):
    with _mariadb_user("SELECT, INSERT, UPDATE, CREATE", "`DB`.*") as (db, password):
        code, report = _check(tmp_path, capsys, db, password, data_save_mode="DROP_DATA")
    assert code == 1
    lacking = {p["privilege"]: p for p in report["privileges"]}
    assert sorted(lacking) == ["CREATE TEMPORARY TABLES", "DELETE", "DROP"]
    assert "data_save_mode DROP_DATA empties the table" in lacking["DELETE"]["why"]
    assert "drops its staging tables" in lacking["DROP"]["why"] and lacking["DROP"]["required"]


def test_check_names_the_schema_privilege_a_new_postgresql_role_lacks(tmp_path, capsys):
    """PostgreSQL 15 no longer lets every role create in schema public: a new role's sink could not
    make its commit-record table."""
    with _pg_role() as (database, role):
        code, report = _check(tmp_path, capsys, (f"jdbc:postgresql://127.0.0.1:5432/{database}", role), "pw")
    assert code == 1, report
    lacking = {p["privilege"]: p for p in report["privileges"]}
    assert lacking["CREATE"]["required"] and "commit-record table" in lacking["CREATE"]["why"], report


def _opened_target(db, password: str, table: str, **options):
    """The Jdbc target of ``table`` as ``db``'s user opens it, with a door that decides every plan (no store)."""
    from seatide.plugin.sink_protocol import open_sink
    from tests.connectors.jdbc_sink_helpers import context, make_sink

    targets = open_sink(make_sink(db, table=table, password=password, **options), context(None, "f4"))
    (key,) = targets.keys()
    target = targets.target(key)
    target.save_mode_decisions = (f"P_f4@{table}",)
    target.decide_save_modes = lambda plan: {"destroy": plan}
    return target


def test_a_user_with_lock_tables_recreates_the_table(spark, locking_user, tmp_path):
    """RECREATE_SCHEMA on MariaDB locks the table, checks, and drops it: the job's rows replace the old ones."""
    db, password = locking_user
    job = f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {db[0].rsplit('/', 1)[1]}.{job}_a (id BIGINT PRIMARY KEY, name TEXT, old INT)",
           f"INSERT INTO {db[0].rsplit('/', 1)[1]}.{job}_a VALUES (7, 'before', 1)")
    writer = routes_writer(spark, db, [f"{job}_a"], job, primary_keys=["id"], password=password,
                           schema_save_mode="RECREATE_SCHEMA")
    tables = {0: frame(spark, [(1, "new", RowKind.INSERT)], "id bigint, name string")}
    frames = TableFrames(tables, {}, {i: df.schema for i, df in tables.items()}.__getitem__,
                         local={i: [tuple(r) for r in df.collect()] for i, df in tables.items()})
    write_exactly_once(writer, SinkCommitLog(str(tmp_path)), frames, 0, txn(job, 0))
    assert _rows(db, password, f"SELECT * FROM {job}_a") == [(1, "new")]


@pytest.mark.parametrize("sink", [{"schema_save_mode": "RECREATE_SCHEMA"},
                                  {"data_save_mode": "CUSTOM_PROCESSING", "custom_sql": "TRUNCATE TABLE {table}"}])
def test_a_user_without_lock_tables_is_refused_before_anything_is_checked_or_destroyed(seatunnel_user, sink):
    """Outside review F4 and of 4f9f607: a step that commits at once (RECREATE_SCHEMA's DROP, a TRUNCATE)
    runs with the table locked; a user who may not lock it is told what to grant before the store is
    asked anything, and the table keeps its rows (no fallback runs the step unlocked)."""
    from seatide.connectors.jdbc.spec import JdbcSinkError

    db, password = seatunnel_user
    table = f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {db[0].rsplit('/', 1)[1]}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {db[0].rsplit('/', 1)[1]}.{table} VALUES (1), (2)")
    target = _opened_target(db, password, table, **{k: v.format(table=table) for k, v in sink.items()})
    asked = []
    target.decide_save_modes = lambda plan: asked.append(plan) or {"destroy": plan}
    with pytest.raises(JdbcSinkError, match="LOCK TABLES") as refused:
        target.save_mode_plan(None)
    assert "GRANT LOCK TABLES ON" in str(refused.value) and "Nothing was checked or destroyed" in str(refused.value)
    assert (asked, _rows(db, password, f"SELECT id FROM {table} ORDER BY id")) == ([], [(1,), (2,)])


def test_a_driver_killed_during_its_recreates_check_leaves_the_table_with_every_row(locking_user, monkeypatch):
    """The driver dies during the check (failpoint ``jdbc.save_mode_decided``), the table locked: its
    connection ends, the lock with it, nothing was dropped. Whoever carries the decision out next asks
    again: refused over rows kept now, the table has every row."""
    from seatide import failpoints
    from seatide.plugin.base import PermanentError

    db, password = locking_user
    table = f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {db[0].rsplit('/', 1)[1]}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {db[0].rsplit('/', 1)[1]}.{table} VALUES (1), (2)")
    hit = failpoints.hit

    def dies_at(name: str, *args, **kwargs):
        if name == "jdbc.save_mode_decided":
            raise KeyboardInterrupt(name)           # the driver killed: no handler of the sink's catches it
        return hit(name, *args, **kwargs)

    monkeypatch.setattr(failpoints, "hit", dies_at)
    first = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")
    with pytest.raises(KeyboardInterrupt):
        first.save_mode_plan(None)
    monkeypatch.undo()
    second = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")

    def kept(plan):
        raise PermanentError("rows kept")

    second.decide_save_modes = kept
    with pytest.raises(PermanentError, match="rows kept"):
        second.save_mode_plan(None)
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
