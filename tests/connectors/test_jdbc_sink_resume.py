"""A Jdbc sink job checkpointed by the SeaTide before the sink ran on the one sink protocol, resumed
by this one, on real PostgreSQL and MariaDB: the records that SeaTide kept (the commit log's flat
``{"rows": n}`` state; in ``seatide_sink_commits`` the batches' records and the save modes' record
``<scope>@<target>`` at batch -1) are read as they are: no batch is applied twice or lost, and no
save mode is made again."""

from __future__ import annotations

import hashlib
import secrets

import pytest

from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, write_exactly_once
from seatide.runtime.sink_runs import sink_run
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    context, db, execute, frame, inserts, make_sink, query, recorded_before, routes_writer, table_name, txn)

pytestmark = pytest.mark.spark


def _checkpointed_before(db, run, table: str, job: str, in_the_log: list[int], in_the_database: list[int]) -> None:
    """What the earlier SeaTide left: DROP_DATA made (its record, the table emptied of the rows from
    before the job), batch ``b`` (rows ``[b]``) committed in the database for each of
    ``in_the_database`` and in the commit log for each of ``in_the_log``."""
    url = JdbcUrl.parse(db[0])
    identity = f"jdbc:{url.dialect}://{url.host.lower()}:{url.port}/{url.database}/{table}"
    sink_id = f"{job}/1/sink[0]"
    execute(db, "CREATE TABLE IF NOT EXISTS seatide_sink_commits (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
            f"DELETE FROM {table}",
            f"INSERT INTO seatide_sink_commits (transaction_id, sink_id, batch_id, row_count) "
            f"VALUES ('{run.door.key_of(identity)}', '{sink_id}', -1, 0)")
    for batch in in_the_database:
        execute(db, f"INSERT INTO {table} VALUES ({batch}, 'n{batch}')",
                f"INSERT INTO seatide_sink_commits (transaction_id, sink_id, batch_id, row_count) "
                f"VALUES ('{run.transaction_prefix}{batch}', '{sink_id}', {batch}, 1)")
    for batch in in_the_log:
        run.log.commit(batch, {"rows": 1})      # the flat state a writer of its own committed


@pytest.mark.parametrize("mode", ["DROP_DATA", "ERROR_WHEN_DATA_EXISTS"])
@pytest.mark.parametrize("logged", [[0], []], ids=["logged", "crashed-before-its-log"])
def test_a_job_checkpointed_before_the_protocol_resumes_without_a_batch_twice_or_lost(spark, db, tmp_path, logged,
                                                                                       mode):
    """Batch 0 is in the database and (``logged``) in the commit log, or only in the database (the
    driver died between the two: the log is empty, so the target counts as never written and its
    save modes pass the door); batch 1 only in the database. Resumed: batches 0 and 1 are replays,
    the save mode is not made again (DROP_DATA empties nothing, ERROR_WHEN_DATA_EXISTS refuses
    nothing: its record stands), batch 2 lands once."""
    table, job = table_name(), table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20))")

    def resumed():
        sink = make_sink(db, table=table, data_save_mode=mode)
        return sink_run(sink, context(spark, job), SinkCommitLog(str(tmp_path / "log")),
                        transaction_prefix=f"T_{job}_1_0_L1_")

    run = resumed()
    _checkpointed_before(db, run, table, job, logged, [0, 1])
    execute(db, f"INSERT INTO {table} VALUES (100, 'after them')")
    assert run.write(inserts(spark, [0]), 0).replayed
    assert run.write(inserts(spark, [1]), 1).replayed
    assert not run.write(inserts(spark, [2]), 2).replayed
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(0,), (1,), (2,), (100,)]
    assert query(db, f"SELECT batch_id FROM seatide_sink_commits WHERE sink_id = '{job}/1/sink[0]' "
                     "ORDER BY batch_id") == [(-1,), (0,), (1,), (2,)]


@pytest.fixture
def two_databases():
    """Two databases of our own on MariaDB, reached through a URL that names none: (url, user), names."""
    names = [f"up_{secrets.token_hex(4)}" for _ in range(2)]
    server = ("jdbc:mariadb://127.0.0.1:3306/", "root")
    execute(server, *(f"CREATE DATABASE {n}" for n in names))
    yield server, names
    execute(server, *(f"DROP DATABASE IF EXISTS {n}" for n in names))


@pytest.mark.parametrize("mode", ["DROP_DATA", "ERROR_WHEN_DATA_EXISTS", "RECREATE_SCHEMA"])
def test_a_multi_table_job_on_a_url_without_a_database_reads_its_save_mode_records_where_it_kept_them(
        spark, tmp_path, two_databases, mode):
    """Finding F1 of review 31. The SeaTide before the protocol kept a multi-table sink's save-mode
    records with its batches' records: on a MySQL/MariaDB URL naming no database, in the first
    table's database, decided once (``<save_modes_key>_commits``). Its driver committed batch 0 in
    the database (up1.a [1], up2.b [2]) and died before its commit log. Resumed: batch 0 is a
    replay and no save mode is made again: up2.b keeps its row (DROP_DATA deleted it, RECREATE_SCHEMA
    dropped the table, ERROR_WHEN_DATA_EXISTS refused the resume)."""
    server, (up1, up2) = two_databases
    job = table_name()
    schema = "id bigint, name string"
    for name, rows in ((f"{up1}.a", 1), (f"{up2}.b", 2)):
        execute(server, f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
                f"INSERT INTO {name} VALUES ({rows}, 'n{rows}')")
    targets = routes_writer(spark, server, ["a", "b"], job, per_table={"a": {"table": f"{up1}.a"},
                                                                       "b": {"table": f"{up2}.b"}},
                            primary_keys=["id"], data_save_mode="DROP_DATA" if mode == "RECREATE_SCHEMA" else mode,
                            **({"schema_save_mode": mode} if mode == "RECREATE_SCHEMA" else {}))
    log, scope = SinkCommitLog(str(tmp_path / "log")), f"S_T_{job}_1_0_L1"
    FileDecisions(log).decide_once(f"{scope}_commits", {"database": up1})
    old = [SaveModeDoor(FileDecisions(log), scope).key_of(f"jdbc:mysql://127.0.0.1:3306//{name}")
           for name in (f"{up1}.a", f"{up2}.b")]
    sink_id = f"{job}/1/sink[0]"
    execute(server, f"CREATE TABLE {up1}.seatide_sink_commits (transaction_id VARCHAR(255) NOT NULL PRIMARY KEY, "
                    "sink_id VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, row_count BIGINT NOT NULL, "
                    "committed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
            *(f"INSERT INTO {up1}.seatide_sink_commits (transaction_id, sink_id, batch_id, row_count) "
              f"VALUES ('{record}', '{sink_id}', -1, 0)" for record in old),
            f"INSERT INTO {up1}.seatide_sink_commits (transaction_id, sink_id, batch_id, row_count) "
            f"VALUES ('{txn(job, 0)}', '{sink_id}', 0, 2)")
    a, b = frame(spark, [(1, "n1", 0)], schema), frame(spark, [(2, "n2", 0)], schema)
    resumed = write_exactly_once(targets, log, TableFrames({0: a, 1: b}, {}, lambda _i: a.schema), 0, txn(job, 0))
    assert resumed.replayed
    assert [query(server, f"SELECT id FROM {name}") for name in (f"{up1}.a", f"{up2}.b")] == [[(1,)], [(2,)]]


@pytest.mark.parametrize("named", ["per job", "per sink"])
def test_a_table_added_to_a_job_checkpointed_before_the_protocol_gets_its_save_modes_once(spark, db, tmp_path, named):
    """Review 31 F7: a multi-table job of tables a and b, DROP_DATA, checkpointed by the SeaTide
    before the protocol: each table's save-mode record (named ``per job``, ``<scope>@<target>``,
    or, before that, ``per sink``, ``<save_modes_key>_<table key>``), batch 0 (a [1], b [2])
    committed, and its commit-log state the flat ``{"rows"}``, which names no table. The job
    resumes with table c added, which holds a row from before the job. Batch 1 (a [3], c [30]):
    c's DROP_DATA is made; batch 2, run by a new attempt (c [31]), makes it no more; a's and b's
    never again."""
    job, url = table_name(), JdbcUrl.parse(db[0])
    a, b, c = (table_name() for _ in range(3))
    for table, row in ((a, 1), (b, 2), (c, 100)):
        execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
                f"INSERT INTO {table} VALUES ({row}, 'n{row}')")
    log, scope = SinkCommitLog(str(tmp_path / "log")), f"S_T_{job}_1_0_L1"
    for table in (a, b):
        label = table if url.dialect == "postgresql" else f"{url.database}.{table}"     # as the sink placed it
        old = (SaveModeDoor(FileDecisions(log), scope).key_of(f"jdbc:{url.dialect}://{url.host}:{url.port}/"
                                                              f"{url.database}/{label}") if named == "per job"
               else f"{scope}_d{hashlib.sha1(label.encode()).hexdigest()[:10]}")
        recorded_before(db, old, f"{job}/1/sink[0]")
    recorded_before(db, txn(job, 0), f"{job}/1/sink[0]", batch=0, rows=2)
    log.commit(0, {"rows": 2})

    def resumed(batch: int, rows: dict[int, list[int]]):
        frames = {i: inserts(spark, ids) for i, ids in rows.items()}
        schema = next(iter(frames.values())).schema
        targets = routes_writer(spark, db, [a, b, c], job, primary_keys=["id"], data_save_mode="DROP_DATA")
        return write_exactly_once(targets, log, TableFrames(frames, {}, lambda _i: schema), batch, txn(job, batch))

    resumed(1, {0: [3], 2: [30]})
    resumed(2, {2: [31]})
    assert [query(db, f"SELECT id FROM {t} ORDER BY id") for t in (a, b, c)] == [[(1,), (3,)], [(2,)], [(30,), (31,)]]
