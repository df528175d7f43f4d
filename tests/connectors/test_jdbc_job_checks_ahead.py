"""A job's Jdbc sinks are checked ahead together: no sink's save modes destroy anything before every
Jdbc target of the job (each sink, each pipeline) was asked whether it can be prepared.

The checks ahead (privileges.py, ``JdbcTarget.check_ahead``) ran per sink: sink A's DROP_DATA emptied
its table, and only then did sink B's first batch find that B's user may not write B's table. Now the
job fails before A's table is touched, naming B's table, the privilege and the GRANT. Likewise a sink
that follows the source's schema changes (``schema.change.behavior = evolve``) has ALTER asked before
its first batch, not at the first change. Real PostgreSQL, a role with exactly the grants each case
needs, jobs run through the driver's own ``run_attempt`` (tests/e2e/harness.py)."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import replace

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.rowkind import RowKind
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
from seatide.plugin.sink_protocol import open_sink
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db
    context, db, execute, frame, make_sink, query, routes_writer, txn)
from tests.connectors.test_jdbc_sink_privileges import _admin, _mariadb_user, _pg_admin, _pg_role, _rows

pytestmark = pytest.mark.spark

FIELDS = "schema = { fields { id = bigint, name = string } }"


def _sink(url: str, user: str, source: str, table: str, extra: str = "", password: str | None = "pw") -> str:
    password = f'password = "{password}", ' if password else ""
    return f'Jdbc {{ plugin_input = "{source}", url = "{url}", user = "{user}", {password}table = "{table}"{extra} }}'


def _job(url: str, user: str, first: str, second: str, pipelines: int, password: str | None = "pw") -> str:
    """Sink A (DROP_DATA into ``first``) and sink B (into ``second``), in one pipeline or one each."""
    sources = [f'FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }}']
    if pipelines == 2:
        sources.append(f'FakeSource {{ plugin_output = "s2", row.num = 3, sequence.field = "id", {FIELDS} }}')
    sinks = [_sink(url, user, "s1", first, ', data_save_mode = "DROP_DATA"', password),
             _sink(url, user, "s1" if pipelines == 1 else "s2", second, "", password)]
    nl = "\n  "
    return f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{
  {nl.join(sources)}
}}
sink {{
  {nl.join(sinks)}
}}
"""


@contextlib.contextmanager
def _writes_only_the_first(server: str, first: str, second: str):
    """A user who may read and write ``first`` (and empty it), and only read ``second``, both tables made
    with two rows: (url, user); its password is "pw"."""
    if server == "mariadb":
        with _mariadb_user("CREATE, DROP", "`DB`.*") as (db, password):
            database = db[0].rsplit("/", 1)[1]
            user = f"'{db[1]}'@'%'"
            _admin(*(f"CREATE TABLE {database}.{t} (id BIGINT, name TEXT)" for t in (first, second)),
                   *(f"INSERT INTO {database}.{t} VALUES (-1, 'kept'), (-2, 'kept')" for t in (first, second)),
                   f"CREATE TABLE {database}.seatide_sink_commits (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                   "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                   "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
                   f"GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.seatide_sink_commits TO {user}",
                   f"GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.{first} TO {user}",
                   f"GRANT SELECT ON {database}.{second} TO {user}",
                   f"SET PASSWORD FOR {user} = PASSWORD('pw')")
            yield db
        return
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                  *(f"CREATE TABLE {t} (id BIGINT, name TEXT)" for t in (first, second)),
                  *(f"INSERT INTO {t} VALUES (-1, 'kept'), (-2, 'kept')" for t in (first, second)),
                  f"GRANT SELECT, INSERT, UPDATE, DELETE ON {first} TO {role}",
                  f"GRANT SELECT ON {second} TO {role}")
        yield f"jdbc:postgresql://127.0.0.1:5432/{database}", role


@pytest.mark.parametrize("server", ["mariadb", "postgresql"])
@pytest.mark.parametrize("pipelines", [1, 2], ids=["two-sinks-one-pipeline", "two-pipelines"])
def test_a_second_sinks_missing_grant_fails_the_job_before_the_first_sinks_table_is_emptied(spark, tmp_path,
                                                                                          pipelines, server):
    """Before: A's table emptied (and written), then B's batch refused for INSERT. Now: the job fails
    naming B's table, INSERT and the GRANT, and A's table keeps its rows."""
    from tests.e2e.harness import InProcessCluster

    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    with _writes_only_the_first(server, first, second) as db:
        url, user = db
        run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(url, user, first, second, pipelines),
                                                                   max_attempts=1)
        assert run.status == "FAILED", run.error
        assert f"{second}: INSERT" in run.error and "GRANT INSERT ON" in run.error, run.error
        assert f"{first}:" not in run.error and "Traceback" not in run.error, run.error
        for table in (first, second):
            assert _rows(db, "pw", f"SELECT id, name FROM {table} ORDER BY id") == [(-2, "kept"), (-1, "kept")]


@pytest.mark.parametrize("pipelines", [1, 2], ids=["two-sinks-one-pipeline", "two-pipelines"])
def test_a_second_sinks_missing_column_fails_the_job_before_the_first_sinks_table_is_emptied(spark, db, tmp_path,
                                                                                           pipelines):
    """Sink B appends (it destroys nothing, so it checked its table only before its own first rows) into
    a table without the input's column ``name``. Before: A's DROP_DATA emptied A's table, then B was
    refused. Now every sink's table is checked when any sink of the job will destroy."""
    from tests.e2e.harness import InProcessCluster

    job = f"t_{secrets.token_hex(3)}"
    first, second = f"{job}_a", f"{job}_b"
    execute(db, f"CREATE TABLE {first} (id BIGINT, name TEXT)", f"INSERT INTO {first} VALUES (-1, 'kept')",
            f"CREATE TABLE {second} (id BIGINT)")
    url, user = db
    run = InProcessCluster(spark, str(tmp_path / "data")).run(_job(url, user, first, second, pipelines, None),
                                                               max_attempts=1)
    assert run.status == "FAILED", run.error
    assert f"table {second} has no column name" in run.error and "Traceback" not in run.error, run.error
    assert query(db, f"SELECT id, name FROM {first}") == [(-1, "kept")]


@pytest.mark.parametrize("told", ["at-evolve", "in-context"])
def test_a_sink_that_follows_schema_changes_without_alter_is_not_refused_for_a_change_that_may_never_come(
        spark, tmp_path, told):
    """``schema.change.behavior = evolve``: a change alters the target (target_evolution.py), which on
    PostgreSQL only the table's owner may. ALTER is not asked ahead: a change may never come, and
    lenient (every CDC source's default) would then refuse every role that appends to a table it does
    not own (outside review). A change it cannot make fails at that change, naming the table."""
    job = f"t_{secrets.token_hex(3)}"
    table = f"{job}_a"
    with _pg_role() as (database, role):
        _pg_admin(database, f"GRANT USAGE, CREATE ON SCHEMA public TO {role}",
                  f"CREATE TABLE {table} (id BIGINT, name TEXT)", f"INSERT INTO {table} VALUES (-1, 'kept')",
                  f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role}")    # owned by postgres: no ALTER
        db = (f"jdbc:postgresql://127.0.0.1:5432/{database}", role)
        if told == "at-evolve":     # as the runtime hands each sink the behaviour before its first batch
            writer = routes_writer(spark, db, [table], job, password="pw", data_save_mode="DROP_DATA")
            writer.evolve([], "evolve")
        else:                       # as the job's checks ahead know it, before any sink's first batch
            sink = make_sink(db, table=table, password="pw", data_save_mode="DROP_DATA")
            writer = open_sink(sink, replace(context(spark, job), schema_changes="evolve"))
        rows = frame(spark, [(1, "new", RowKind.INSERT)], "id bigint, name string")
        write_exactly_once(writer, SinkCommitLog(str(tmp_path)), rows, 0, txn(job, 0))
        assert _rows(db, "pw", f"SELECT id, name FROM {table}") == [(1, "new")]


def test_a_multi_table_sinks_missing_column_fails_the_job_before_another_pipelines_table_is_emptied(
        spark, db, tmp_path):  # noqa: F811 - db
    """Pipeline 2's sink writes a multi-table source's tables, whose fields it learns per batch; its
    ``orders`` table lacks ``price``. Its tables are checked ahead through their fields without rows
    (``RoutedPipeline.fields_of``) before pipeline 1's DROP_DATA empties its table."""
    from tests.e2e.harness import InProcessCluster

    job = f"t_{secrets.token_hex(3)}"
    first = f"{job}_a"
    execute(db, f"CREATE TABLE {first} (id BIGINT, name TEXT)", f"INSERT INTO {first} VALUES (-1, 'kept')",
            f"CREATE TABLE {job}_orders (id BIGINT, item TEXT)")
    url, user = db
    tables = f"""FakeSource {{ plugin_output = "shop", tables_configs = [
      {{ row.num = 3, sequence.field = id, schema {{ table = "shop.orders", fields {{ id = bigint, item = string,
         price = double }} }} }},
      {{ row.num = 3, sequence.field = id, schema {{ table = "shop.customers", fields {{ id = bigint, age = int }} }} }}
    ] }}"""
    sinks = [_sink(url, user, "s1", first, ', data_save_mode = "DROP_DATA"', None)]
    # MariaDB: the tables' own database (shop) unless one is named
    placed = f', database = "{url.rsplit("/", 1)[1]}"' if "mariadb" in url else ""
    sinks.append(_sink(url, user, "shop", job + "_${table_name}", placed, None))
    text = f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0 }}
source {{
  FakeSource {{ plugin_output = "s1", row.num = 3, sequence.field = "id", {FIELDS} }}
  {tables}
}}
sink {{
  {sinks[0]}
  {sinks[1]}
}}
"""
    run = InProcessCluster(spark, str(tmp_path / "data")).run(text, max_attempts=1)
    assert run.status == "FAILED", run.error
    assert f"{job}_orders has no column price" in run.error and "Traceback" not in run.error, run.error
    assert query(db, f"SELECT id, name FROM {first}") == [(-1, "kept")]
    execute(db, f"DROP TABLE IF EXISTS {job}_customers")
