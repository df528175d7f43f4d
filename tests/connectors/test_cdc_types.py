"""Change data capture of every type: Postgres-CDC (PostGIS included) and MySQL-CDC over a table
holding every type of SeaTunnel's pages and the issue's, written by the Jdbc sink into a table of
the same definition and into one the sink creates (schema_save_mode), equals the source column
by column after the snapshot and after changes (inserts, an update that fills a row of nulls, a
delete); a third sink's table in the other kind of database holds the same SeaTunnel values.
Real jobs on the private CDC servers."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from seatide.connectors.jdbc.url import JdbcUrl
from seatide.store import schema as s
from seatide.store.jobs import request_stop
from seatide.store.states import JOB_TERMINAL
from tests.e2e.harness import InProcessCluster
from tests.every_type import (MY_COLUMNS, PG_COLUMNS, PG_NOT_PORTABLE, change_rows, create_table, my_differences,
                              pg_differences, pg_extras, read_back, same_values, unique)

pytestmark = pytest.mark.spark

DEADLINE_S = 120.0
# The other kind of database, where a third sink creates its table: the shared test servers
OTHER = {"postgresql": ("jdbc:mariadb://127.0.0.1:3306/test", "root"),
         "mysql": ("jdbc:postgresql://127.0.0.1:5432/test", "postgres")}


def streaming_job(source: str, sink: str) -> str:
    return (f"env {{ job.mode = STREAMING\n checkpoint.interval = 1000\n job.retry.times = 0 }}\n"
            f"source {{ {source} }}\nsink {{ {sink} }}\n")


def jdbc_sinks(url: str, user: str, across: tuple[str, str, str]) -> str:
    """Into ``dst``, made by the test like the source, into ``made``, which the sink creates, and
    into a table the sink creates in the other kind of database (``across``: url, user, table)."""
    targets = ((url, user, "dst", "ERROR_WHEN_SCHEMA_NOT_EXIST"), (url, user, "made", "CREATE_SCHEMA_WHEN_NOT_EXIST"),
               (*across, "CREATE_SCHEMA_WHEN_NOT_EXIST"))
    return "\n".join(f'Jdbc {{ url = "{u}", user = "{name}", password = "", table = "{table}", '
                     f'primary_keys = ["id"], schema_save_mode = "{mode}" }}' for u, name, table, mode in targets)


@pytest.fixture
def across(request):
    """A table name in the other kind of database, dropped afterwards: (url, user, table)."""
    url, user = OTHER[request.param]
    table = unique("cdc_across")
    yield url, user, table
    with JdbcUrl.parse(url).connect(user, autocommit=True) as conn:
        conn.cursor().execute(f"DROP TABLE IF EXISTS {table}")


class Follower:
    """Runs in the harness's stop thread: waits for the copy to equal the source, changes the
    source, waits again, then cancels the job. What it saw is kept for the test to assert."""

    def __init__(self, differences, change):
        self.differences, self.change = differences, change
        self.reached: list[str] = []
        self.last: dict = {}

    def _converge(self, what: str, ended) -> bool:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not ended():
            try:
                self.last = self.differences()
            except Exception as exc:   # noqa: BLE001 - a copy not yet written to; reported if it stays so
                self.last = {"error": repr(exc)}
            if not self.last:
                self.reached.append(what)
                return True
            time.sleep(0.5)
        return False

    def __call__(self, store, job_id: str) -> None:
        def ended() -> bool:
            with store.read() as conn:
                return conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == job_id)).scalar() in JOB_TERMINAL

        try:
            if self._converge("snapshot", ended):
                self.change()
                self._converge("changes", ended)
        finally:
            if not ended():
                request_stop(store, job_id, actor="test")


def run_and_follow(spark, tmp_path, job: str, follower: Follower):
    local = InProcessCluster(spark, str(tmp_path / "data"), driver_thread=True)   # as a driver process runs it
    run = local.run(job, stop_after=follower)
    assert follower.reached == ["snapshot", "changes"], (follower.reached, follower.last, run.error)
    assert run.status == "CANCELED", run.error


@pytest.mark.parametrize("across", ["postgresql"], indirect=True)
def test_postgres_cdc_carries_every_type_into_a_table_of_those_types(spark, private_postgres, tmp_path, across):
    database = unique("pg_cdc_types")
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with private_postgres.connect(database) as conn:
            pg_extras(conn)
            create_table(conn.cursor(), "src", PG_COLUMNS)
            conn.execute("ALTER TABLE src REPLICA IDENTITY FULL")
            conn.execute("CREATE TABLE dst (LIKE src INCLUDING ALL)")

        def differences():
            with private_postgres.connect(database) as conn:
                made = dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                                         "WHERE attrelid = 'made'::regclass AND attnum > 0").fetchall())
                declared = dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                                             "WHERE attrelid = 'src'::regclass AND attnum > 0").fetchall())
                # the sink declares each column as the source does, but for the test's own types
                # (an enum as text; a domain as its base type)
                wrong_types = {c: (t, made.get(c)) for c, t in declared.items()
                               if made.get(c) != PG_NOT_PORTABLE.get(c, t)}
                return {**pg_differences(conn, "src", "dst", PG_COLUMNS),
                        **{f"made.{c}": rows for c, rows in pg_differences(conn, "src", "made", PG_COLUMNS).items()},
                        **({"types": wrong_types} if wrong_types else {})}

        def change():
            with private_postgres.connect(database) as conn:
                change_rows(conn.cursor(), "src", PG_COLUMNS)

        url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{database}"
        source = (f'Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "", '
                  f'table-names = ["{database}.public.src"] }}')
        run_and_follow(spark, tmp_path, streaming_job(source, jdbc_sinks(url, "postgres", across)),
                       Follower(differences, change))
        # across kinds the copy holds the same SeaTunnel values (arrays as JSON text in MariaDB)
        arrays = [c for c, spec in PG_COLUMNS.items() if spec[2].startswith("array<")]
        assert same_values(read_back(spark, url, "postgres", "src"), read_back(spark, *across),
                           json_columns=arrays) == {}
    finally:
        private_postgres.drop_database(database)


@pytest.mark.parametrize("across", ["mysql"], indirect=True)
def test_mysql_cdc_carries_every_type_into_a_table_of_those_types(spark, private_mariadb, tmp_path, across):
    database = unique("my_cdc_types")
    private_mariadb.execute(f"CREATE DATABASE {database}")
    try:
        with private_mariadb.connect(database) as conn, conn.cursor() as cur:
            create_table(cur, "src", MY_COLUMNS)
            cur.execute("CREATE TABLE dst LIKE src")

        def differences():
            with private_mariadb.connect(database) as conn, conn.cursor() as cur:
                cur.execute("SHOW COLUMNS FROM src")
                declared = {row[0]: row[1] for row in cur.fetchall()}
                cur.execute("SHOW COLUMNS FROM made")
                made = {row[0]: row[1] for row in cur.fetchall()}
                wrong_types = {c: (t, made.get(c)) for c, t in declared.items() if made.get(c) != t}
                return {**my_differences(cur, "src", "dst", MY_COLUMNS),
                        **{f"made.{c}": rows for c, rows in my_differences(cur, "src", "made", MY_COLUMNS).items()},
                        **({"types": wrong_types} if wrong_types else {})}

        def change():
            with private_mariadb.connect(database) as conn, conn.cursor() as cur:
                change_rows(cur, "src", MY_COLUMNS)

        url = f"jdbc:mariadb://127.0.0.1:{private_mariadb.port}/{database}"
        source = (f'MySQL-CDC {{ base-url = "{url}", username = "root", password = "", '
                  f'table-names = ["{database}.src"], server-id = 5410 }}')
        run_and_follow(spark, tmp_path, streaming_job(source, jdbc_sinks(url, "root", across)),
                       Follower(differences, change))
        # MySQL-CDC gives TIME as a string (a duration, docs/connectors/mysql-cdc.md), the Jdbc source as a time
        expected = {key: {**row, "tm": row["tm"] and row["tm"].isoformat()}
                    for key, row in read_back(spark, url, "root", "src").items()}
        assert same_values(expected, read_back(spark, *across)) == {}
    finally:
        private_mariadb.execute(f"DROP DATABASE {database}")
