"""Jdbc sink: one target table written by several sinks or pipelines of one job, on real
PostgreSQL and MariaDB (review 31): it is one target however its options spell it, and its save
modes are decided once for all of them, so none refuses or empties what another wrote."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from seatide.connectors.jdbc import save_modes
from seatide.connectors.jdbc.named_lock import LockNotTaken
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.plugin.tables import TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog
from seatide.runtime.sink_runs import sink_run
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    context, db, execute, inserts, make_sink, query, recorded_before, table_name)
from tests.held import Held

pytestmark = pytest.mark.spark


def _pipeline(spark, db, tmp_path, job: str, pipeline: int, routed: bool, others: tuple = (), **options):
    """Pipeline ``pipeline`` of job ``job``: its sink (a single table, or a route list of one
    input table), its own commit log, the job's save-mode door shared with the job's others;
    ``others``: the job's other sinks."""
    sink = make_sink(db, **options)
    door = SaveModeDoor(FileDecisions(SinkCommitLog(str(tmp_path / "job"))), f"P_{job}")
    return sink_run(sink, context(spark, job, (*others, sink)), SinkCommitLog(str(tmp_path / f"p{pipeline}")),
                    routes=[TableRoute(0, "src.orders", None, sink)] if routed else None, door=door,
                    transaction_prefix=f"T_{job}_{pipeline}_0_L1_")


def _qualified(db, table: str) -> str:
    """``table`` named with what the dialect fills in when it is not: MariaDB the URL's database,
    PostgreSQL the schema its search_path resolves it to (public, unless a test put another first)."""
    if "postgresql" in db[0]:
        return f"{query(db, 'SELECT current_schema()')[0][0]}.{table}"
    return f"{JdbcUrl.parse(db[0]).database}.{table}"


@pytest.mark.parametrize("routed", [False, True], ids=["single", "routed"])
def test_one_table_spelled_two_ways_is_one_target_whose_drop_data_is_made_once(spark, db, tmp_path, routed):
    """Finding F5: pipeline 1 writes ``orders``, pipeline 2 the same table as ``<database>.orders``
    (MariaDB) or ``public.orders`` (PostgreSQL), both DROP_DATA. The rows from before the job go
    once; pipeline 2 deletes nothing pipeline 1 wrote."""
    table, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (100, 'before the job')")
    options = dict(primary_keys=["id"], data_save_mode="DROP_DATA")
    first = _pipeline(spark, db, tmp_path, job, 1, routed=False, table=table, **options)
    second = _pipeline(spark, db, tmp_path, job, 2, routed=routed, table=_qualified(db, table), **options)
    first.write(inserts(spark, [1]), 0)
    second.write(inserts(spark, [2]), 0)
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
    assert first.targets.keys() == second.targets.keys()


@pytest.mark.parametrize("mode, before", [("ERROR_WHEN_DATA_EXISTS", "empty"), ("ERROR_WHEN_DATA_EXISTS", "missing"),
                                          ("DROP_DATA", "missing")])
def test_a_second_pipeline_that_found_no_decision_neither_refuses_nor_empties_what_the_first_wrote(
        spark, db, tmp_path, monkeypatch, mode, before):
    """Finding F6: pipelines 1 and 2 of a job write one table. Pipeline 2 finds no save-mode
    decision of the job's and is held before its plan; pipeline 1 decides, makes the table (when
    ``missing``) and commits a row; pipeline 2 goes on. Its plan finds what pipeline 1 recorded
    under the same lock: ERROR_WHEN_DATA_EXISTS refuses nothing (the rows are the job's), DROP_DATA
    deletes nothing."""
    table, job = table_name(), table_name()
    if before == "empty":
        execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))")
    options = dict(table=table, primary_keys=["id"], data_save_mode=mode)
    first = _pipeline(spark, db, tmp_path, job, 1, routed=False, **options)
    second = _pipeline(spark, db, tmp_path, job, 2, routed=False, **options)
    held = Held(monkeypatch, "sink.save_mode_plan", tmp_path / "go")
    with ThreadPoolExecutor(1) as pool:
        later = pool.submit(second.write, inserts(spark, [2]), 0)
        held.reached()
        first.write(inserts(spark, [1]), 0)
        held.release()
        later.result(timeout=300)
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]


def test_an_unqualified_name_is_the_table_its_connections_search_path_finds(spark, db, tmp_path):
    """Review 31 N3: on PostgreSQL an unqualified name is the table in the first schema of the
    session's search_path that exists, not always ``public``. The database puts ``etl`` first:
    pipeline 1 writes ``orders`` (so ``etl.orders``), pipeline 2 ``public.orders``, both
    DROP_DATA. They are two targets: each one's rows from before the job go, neither takes the
    other's decision."""
    if "postgresql" not in db[0]:
        pytest.skip("schemas and a search_path: PostgreSQL's")
    table, job = table_name(), table_name()
    execute(db, "CREATE SCHEMA etl", f"ALTER DATABASE {JdbcUrl.parse(db[0]).database} SET search_path = etl, public",
            f"CREATE TABLE public.{table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO public.{table} VALUES (100, 'before the job')")
    try:
        options = dict(primary_keys=["id"], data_save_mode="DROP_DATA")
        first = _pipeline(spark, db, tmp_path, job, 1, routed=False, table=table, **options)
        second = _pipeline(spark, db, tmp_path, job, 2, routed=False, table=f"public.{table}", **options)
        first.write(inserts(spark, [1]), 0)
        second.write(inserts(spark, [2]), 0)
        assert query(db, f"SELECT id FROM etl.{table}") == [(1,)]
        assert query(db, f"SELECT id FROM public.{table} ORDER BY id") == [(2,)], "public's DROP_DATA was not made"
        assert first.targets.keys() != second.targets.keys()
    finally:   # the module's later tests resolve unqualified names in public again
        execute(db, f"ALTER DATABASE {JdbcUrl.parse(db[0]).database} RESET search_path", "DROP SCHEMA etl CASCADE")


@pytest.mark.parametrize("left", ["record", "record and decision"])
def test_a_job_checkpointed_before_one_spelling_was_one_target_keeps_what_the_other_spelling_wrote(
        spark, db, tmp_path, left):
    """Review 31 N2: a job checkpointed by the SeaTide before F5, whose pipeline 1 writes
    ``orders`` and pipeline 2 the same table as ``<database>.orders`` or ``public.orders``, both
    DROP_DATA. Pipeline 1 made the save mode under its spelling's key (its ``record`` in the
    database; since the port also the door's ``decision``) and committed row 1; pipeline 2 had
    not prepared the table yet. Resumed: pipeline 2 finds that decision by pipeline 1's spelling
    (a sink of the job resolved to its table) and deletes nothing."""
    table, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))", f"INSERT INTO {table} VALUES (1, 'n1')")
    options = dict(primary_keys=["id"], data_save_mode="DROP_DATA")
    second = _pipeline(spark, db, tmp_path, job, 2, routed=False, others=(make_sink(db, table=table, **options),),
                       table=_qualified(db, table), **options)
    url = JdbcUrl.parse(db[0])
    spelled = f"jdbc:{url.dialect}://{url.host.lower()}:{url.port}/{url.database}/{table}"   # pipeline 1's key then
    record = second.door.key_of(spelled)
    recorded_before(db, record, f"{job}/1/sink[0]")
    if left == "record and decision":
        second.door.records.decide_once(record, {"target": spelled, "destroy": {"step": "DROP_DATA", "record": record,
                                                                                "home": None}})
    second.write(inserts(spark, [2]), 0)
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]


def test_two_spellings_creating_one_missing_table_wait_on_one_lock(spark, db, tmp_path, monkeypatch):
    """Review 31 N8: pipeline 1 writes ``orders``, pipeline 2 the same table spelled
    ``<database>.orders`` or ``<schema>.orders``; the table is missing (CREATE_SCHEMA_WHEN_NOT_EXIST).
    Pipeline 1 is held inside the lock of its CREATE TABLE. Pipeline 2 waits on that same lock
    (named by the target, not the spelling) instead of creating the table under a lock of its
    own, which failed pipeline 1's CREATE: with a wait cut to 1 s its batch fails while pipeline
    1 holds it (a retry goes on). Released, pipeline 1 creates the table and writes, and pipeline
    2's batch, run again, writes too."""
    table, job = table_name(), table_name()
    monkeypatch.setattr(save_modes, "lock_wait_s", lambda: 1.0)
    options = dict(primary_keys=["id"], schema_save_mode="CREATE_SCHEMA_WHEN_NOT_EXIST")
    first = _pipeline(spark, db, tmp_path, job, 1, routed=False, table=table, **options)
    second = _pipeline(spark, db, tmp_path, job, 2, routed=False, table=_qualified(db, table), **options)
    held = Held(monkeypatch, "jdbc.create_table", tmp_path / "go")
    with ThreadPoolExecutor(1) as pool:
        creating = pool.submit(first.write, inserts(spark, [1]), 0)
        try:
            held.reached()
            with pytest.raises(LockNotTaken):
                second.write(inserts(spark, [2]), 0)
        finally:
            held.release()
        creating.result(timeout=300)
    second.write(inserts(spark, [2]), 0)
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]


def test_a_query_sinks_key_as_the_previous_release_read_its_quoted_table_is_an_earlier_spelling(spark, db):
    """Outside review 8b, F3: the first target keys (2026-11-30) read ``INSERT INTO "order-items"`` as table ``order``, and
    its commit marks name that key. The table sink that empties ``order-items`` must count them as
    its own target's (the kept-rows check compares its names with the marks), and the query sink
    must find them as its earlier key."""
    from seatide.connectors.jdbc.target_names import TargetNames

    table = table_name() + "-items"
    quote = '"' if "postgresql" in db[0] else "`"
    dropping = make_sink(db, table=f"{quote}{table}{quote}", data_save_mode="DROP_DATA")
    querying = make_sink(db, query=f"INSERT INTO {quote}{table}{quote} (id) VALUES (?)")
    naming = TargetNames(context(spark, "job", (dropping, querying)), querying)
    route = TableRoute(0, "src.orders", None, querying)
    assert naming.key(route).endswith("/" + table)
    first_read = naming.key_first_read(route)
    assert first_read.endswith("/" + table.split("-")[0])
    assert first_read in naming.job_spellings()[naming.key(route)]
