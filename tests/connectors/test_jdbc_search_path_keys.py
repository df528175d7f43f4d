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
from types import SimpleNamespace

import pytest
from sqlalchemy import and_, delete

from seatide import failpoints
from seatide.connectors.jdbc.target_names import PINNED_SCHEMA
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import PermanentError
from seatide.runtime.commit_log import SinkCommitLog
from seatide.runtime.sink_runs import sink_run
from seatide.store import schema as s
from seatide.store.db import open_store
from tests.connectors.jdbc_sink_helpers import context, execute, inserts, make_sink, query
from tests.contract.harness import Pipeline, routes, rows, tables

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


# -- across attempts: the schema is pinned for the job's run ------------------------------------------
# Outside review: each attempt resolved the unqualified name again. A schema made first on the role's
# search_path between attempts took the next attempt's key, its commit records' home and its rows: a
# batch the dead attempt had committed was replayed into the new schema's table (twice in all).

@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = open_store(f"sqlite:///{tmp_path_factory.mktemp('search-path-store')}/state.db")
    yield st
    st.dispose()


def _tables_in(url, schema: str) -> list[str]:
    return [t for (t,) in query((url, "postgres"), f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' "
                                                   "AND tablename NOT LIKE 'seatide%' ORDER BY tablename")]


def _ids_in(url, schema: str, table: str = "orders") -> list[int] | None:
    """The ids in ``schema.table``; None: there is no such table."""
    if table not in _tables_in(url, schema):
        return None
    return [i for (i,) in query((url, "postgres"), f"SELECT id FROM {schema}.{table} ORDER BY id")]


def test_a_retried_attempt_replays_a_committed_batch_where_the_first_attempt_wrote_it(spark, pg, store, tmp_path,
                                                                                     monkeypatch):
    """Attempt 1 commits batch 0 into ``public.orders`` (``own`` does not exist) and dies before its
    own log hears of it; ``own``, first on the role's search_path, is made; attempt 2 replays batch 0
    and writes batch 1: both land once, in ``public.orders``, and ``own`` gets no table."""
    url, role = pg
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):          # the driver dies after the database committed
        pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [1, 2]), 0)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    execute((url, "postgres"), "CREATE SCHEMA own")
    run = pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark)
    replayed = run.write(rows(spark, [1, 2]), 0).replayed
    assert not run.write(rows(spark, [3]), 1).replayed
    landed = {schema: _ids_in(url, schema) for schema in ("public", "own")}
    assert landed == {"public": [1, 2, 3], "own": None}
    assert replayed
    assert _tables_in(url, "own") == []
    assert [key.rsplit("/", 2)[-2] for key in run.targets.keys()] == ["public"]


def test_an_attempt_whose_pinned_schema_was_dropped_refuses_and_writes_nowhere_else(spark, pg, store, tmp_path):
    """Attempt 1 writes ``orders`` into ``own`` (first on the role's search_path); ``own`` is dropped;
    attempt 2 refuses at its start, naming the table, the schema and what to do, and makes no
    ``public.orders``."""
    url, role = pg
    execute((url, "postgres"), "CREATE SCHEMA own")
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [1]), 0)
    assert query((url, "postgres"), "SELECT id FROM own.orders") == [(1,)]
    execute((url, "postgres"), "DROP SCHEMA own CASCADE")
    with pytest.raises(PermanentError, match=r"table 'orders'.*schema 'own'.*no longer exists.*CREATE SCHEMA"):
        pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark)
    assert _tables_in(url, "public") == []


def test_a_run_recorded_before_the_pin_pins_the_schema_its_checkpoint_names(spark, pg, store, tmp_path):
    """A run whose attempts resolved the name each time left no pin: its next attempt pins the schema
    its checkpoint's target key names (``public``, where batch 0 is), not ``own``, made first on the
    search_path since (that split the table in two: outside review of the pin, #1); a schema put
    first on the search_path after that changes nothing."""
    url, role = pg
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [1]), 0)
    with store.write() as conn:       # as the SeaTide before the pin left the run
        conn.execute(delete(s.sink_manifests).where(and_(s.sink_manifests.c.job_id == pipeline.job_id,
                                                         s.sink_manifests.c.transaction_id.like(f"{PINNED_SCHEMA}@%"))))
    execute((url, "postgres"), "CREATE SCHEMA own")
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [2]), 1)
    execute((url, "postgres"), "CREATE SCHEMA newer", f"ALTER ROLE {role} SET search_path = newer, own, public")
    pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [3]), 2)
    assert {schema: _ids_in(url, schema) for schema in ("public", "own", "newer")} == \
        {"public": [1, 2, 3], "own": None, "newer": None}


def test_a_multi_table_sinks_replay_finds_its_commit_records_where_the_first_attempt_kept_them(spark, pg, store,
                                                                                              tmp_path, monkeypatch):
    """A multi-table sink keeps its commit records in the connection's schema, not beside one table:
    that schema is the pinned one too. Attempt 1 commits batch 0 into ``public`` and dies before its
    log hears of it; ``own`` is made; attempt 2's replay of batch 0 finds the record and writes nothing."""
    url, role = pg

    def sinks():
        return routes(SimpleNamespace(sink=lambda table: make_sink((url, role), table=table)), ["orders", "items"])

    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):
        pipeline.open(pipeline.attempt(), sinks(), spark).write(tables(spark, {0: [1], 1: [2]}), 0)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    execute((url, "postgres"), "CREATE SCHEMA own")
    run = pipeline.open(pipeline.attempt(), sinks(), spark)
    replayed = run.write(tables(spark, {0: [1], 1: [2]}), 0).replayed
    assert {t: _ids_in(url, "public", t) for t in ("orders", "items")} == {"orders": [1], "items": [2]}
    assert _tables_in(url, "own") == [] and replayed


def query_sink_over_public_orders(pg):
    """``public.orders`` made and granted to the test's role; a maker of ``query`` sinks inserting into it unqualified."""
    url, role = pg
    execute((url, "postgres"), "CREATE TABLE public.orders (id BIGINT, name TEXT)",
            f"GRANT ALL ON public.orders TO {role}")
    return lambda: make_sink((url, role), query="INSERT INTO orders (id, name) VALUES (?, ?)")


def test_a_query_sinks_replay_finds_its_commit_records_where_the_first_attempt_kept_them(spark, pg, store, tmp_path,
                                                                                        monkeypatch):
    """A ``query`` sink's commit records live in the connection's schema too, the pinned one: attempt
    1 commits batch 0 into ``public.orders`` and dies before its log hears of it; ``own`` is made;
    attempt 2's replay finds the record and inserts nothing again."""
    url, role = pg
    sink = query_sink_over_public_orders(pg)

    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):
        pipeline.open(pipeline.attempt(), sink(), spark).write(rows(spark, [1, 2]), 0)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    execute((url, "postgres"), "CREATE SCHEMA own")
    replayed = pipeline.open(pipeline.attempt(), sink(), spark).write(rows(spark, [1, 2]), 0).replayed
    assert _ids_in(url, "public") == [1, 2] and replayed


def test_a_run_recorded_before_the_pin_whose_checkpoint_heard_of_no_batch_pins_where_its_records_are(
        spark, pg, store, tmp_path, monkeypatch):
    """As above, but the run's first attempt died after its batch 0 committed and before its checkpoint
    heard of it: no target key tells the schema, the sink's commit records in ``public`` do. The resume
    pins ``public``, finds batch 0 recorded there, and ``own`` (made since, first on the search_path)
    gets no table."""
    url, role = pg
    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    monkeypatch.setitem(failpoints._POINTS, "sink.after_decision", "raise")
    with pytest.raises(failpoints.FailpointError):
        pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark).write(rows(spark, [1]), 0)
    monkeypatch.delitem(failpoints._POINTS, "sink.after_decision")
    with store.write() as conn:       # as the SeaTide before the pin left the run
        conn.execute(delete(s.sink_manifests).where(and_(s.sink_manifests.c.job_id == pipeline.job_id,
                                                         s.sink_manifests.c.transaction_id.like(f"{PINNED_SCHEMA}@%"))))
    execute((url, "postgres"), "CREATE SCHEMA own")
    run = pipeline.open(pipeline.attempt(), make_sink((url, role), table="orders"), spark)
    assert run.write(rows(spark, [1]), 0).replayed
    run.write(rows(spark, [2]), 1)
    assert {schema: _ids_in(url, schema) for schema in ("public", "own")} == {"public": [1, 2], "own": None}


def test_a_multi_table_sink_of_qualified_tables_whose_records_schema_was_dropped_says_it_is_the_records(
        spark, pg, store, tmp_path):
    """Its tables name their schemas: the pinned schema holds only the sink's commit records, and the
    refusal says so rather than that a table names no schema (outside review of the pin, #10)."""
    url, role = pg
    execute((url, "postgres"), "CREATE SCHEMA own")

    def sinks():
        return routes(SimpleNamespace(sink=lambda table: make_sink((url, role), table=table)),
                      ["public.orders", "public.items"])

    pipeline = Pipeline(store, str(tmp_path / "checkpoints"))
    pipeline.open(pipeline.attempt(), sinks(), spark).write(tables(spark, {0: [1], 1: [2]}), 0)
    execute((url, "postgres"), "DROP SCHEMA own CASCADE")
    run = pipeline.open(pipeline.attempt(), sinks(), spark)
    with pytest.raises(PermanentError) as refused:       # asked where its records are, at its first batch
        run.write(tables(spark, {0: [3], 1: [4]}), 1)
    said = str(refused.value)
    assert "names no schema" not in said, said
    assert all(part in said for part in ("commit records", "schema 'own'", "no longer exists",
                                         'CREATE SCHEMA "own", with table seatide_sink_commits')), said
