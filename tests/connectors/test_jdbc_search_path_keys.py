"""Outside review 8b, F10: a PostgreSQL Jdbc sink whose ``table`` names no schema is keyed by the
schema its session resolves the name to (``current_schema()``: the first schema of its search_path
that exists), asked when its targets open. Its writes resolved the name again in every later
session: when the search_path's first schema came to exist after the key was made (the default
``"$user", public`` once a schema named for the role is created, or a search_path set per role), the
table was created and written in that schema while its key, its save-mode decision and every
overlap check named ``public``'s. The sink now writes the table in the schema its key names,
resolved once. Real PostgreSQL (127.0.0.1:5432), a role with its own search_path."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.url import JdbcUrl
from seatide.runtime.sink_runs import sink_run
from seatide.runtime.commit_log import SinkCommitLog
from tests.connectors.jdbc_sink_helpers import context, execute, inserts, make_sink, query

pytestmark = pytest.mark.spark
ADMIN = "jdbc:postgresql://127.0.0.1:5432/{}"


@pytest.fixture
def pg():
    """A database of its own and a role whose search_path is ``own, public`` (``own`` not made
    yet): (url, role)."""
    name, role = f"jdbc_keys_{secrets.token_hex(4)}", f"keys_{secrets.token_hex(4)}"
    admin = JdbcUrl.parse(ADMIN.format("test")).connect("postgres", autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE {name}")
    admin.cursor().execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
    admin.cursor().execute(f"ALTER ROLE {role} SET search_path = own, public")
    yield ADMIN.format(name), role
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.cursor().execute(f"DROP ROLE IF EXISTS {role}")
    admin.close()


def test_an_unqualified_table_is_written_where_its_key_names_it_when_the_search_path_changes(spark, pg, tmp_path):
    url, role = pg
    run = sink_run(make_sink((url, role), table="orders", primary_keys=["id"]), context(spark, "j"),
                   SinkCommitLog(str(tmp_path / "p1")), transaction_prefix="T_j_1_0_L1_")
    [key] = run.targets.keys()
    assert key.endswith("/public/orders"), key          # own did not exist: current_schema() was public
    execute((url, "postgres"), "CREATE SCHEMA own")     # the role's search_path now starts there
    run.write(inserts(spark, [1, 2]), 0)
    assert query((url, "postgres"), "SELECT id FROM public.orders ORDER BY id") == [(1,), (2,)]
    assert query((url, "postgres"), "SELECT tablename FROM pg_tables WHERE schemaname = 'own'") == []
