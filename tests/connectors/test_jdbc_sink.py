"""Jdbc sink on real PostgreSQL and MariaDB: exactly once per micro-batch, row kinds, save modes."""

from __future__ import annotations

import datetime as dt
import threading
import time
from decimal import Decimal

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import RowKind
from seatide.plugin.sink_protocol import open_sink
from seatide.plugin.tables import TableFrames
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once
# db: the fixture; FencedDecisions, query and table_name: other modules import them from here
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401
    FencedDecisions, context, db, execute, frame, inserts, make_sink, on_driver, query, routes_writer, spark_jobs_of,
    staging_engines_at_commit, table_name, txn, write)

pytestmark = pytest.mark.spark


def test_insert_only_batch_lands_with_its_commit_record(spark, db, tmp_path):
    table = table_name()
    writer = open_sink(make_sink(db, table=table), context(spark, table))
    result = write(writer, tmp_path, inserts(spark, range(5)), 0)
    assert result.state["rows"] == 5
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(i, f"n{i}") for i in range(5)]
    assert query(db, f"SELECT transaction_id, row_count FROM seatide_sink_commits WHERE transaction_id = '{txn(table, 0)}'") \
        == [(txn(table, 0), 5)]


def test_replayed_batch_writes_nothing_even_when_only_the_database_committed_it(spark, db, tmp_path):
    table = table_name()
    writer = open_sink(make_sink(db, table=table), context(spark, table))
    write(writer, tmp_path / "log", inserts(spark, range(3)), 0)
    assert write(writer, tmp_path / "log", inserts(spark, range(3)), 0).replayed   # the runtime's log knows it
    # The driver died after the database commit, before the runtime's log: a new writer, an empty log.
    fresh = open_sink(make_sink(db, table=table), context(spark, table))
    again = write(fresh, tmp_path / "lost-log", inserts(spark, range(3)), 0)
    # a replay (nothing written), whose state still carries its rows for the checkpoint to take
    assert again.state["rows"] == 3 and again.replayed
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(3,)]


def test_fenced_batch_commits_nothing_and_its_retry_commits_once(spark, db, tmp_path):
    table = table_name()
    writer = open_sink(make_sink(db, table=table), context(spark, table))

    def zombie():
        raise RuntimeError("attempt fenced")

    with pytest.raises(RuntimeError, match="fenced"):
        write(writer, tmp_path, inserts(spark, range(4)), 0, fence=zombie)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(0,)]
    assert query(db, f"SELECT COUNT(*) FROM seatide_sink_commits WHERE transaction_id = '{txn(table, 0)}'") == [(0,)]
    write(writer, tmp_path, inserts(spark, range(4)), 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(4,)]
    here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
    staged = [t for (t,) in query(db, "SELECT table_name FROM information_schema.tables WHERE "
                                      f"table_name LIKE 'seatide_stage%' AND table_schema = {here}")]
    assert staged == [], "the fenced attempt's staging table outlived the next commit"


def test_changes_apply_by_key_with_the_last_change_per_key_winning(spark, db, tmp_path):
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (4, 'old4'), (5, 'old5'), (6, 'old6')")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    rows = [
        (1, "a", RowKind.INSERT), (1, "a", RowKind.UPDATE_BEFORE), (1, "a2", RowKind.UPDATE_AFTER),
        (2, "b", RowKind.INSERT), (2, "b", RowKind.DELETE),                  # gone within the batch
        (3, "c", RowKind.INSERT),
        (4, "old4", RowKind.DELETE),                                         # deletes an existing row
        (5, "old5", RowKind.UPDATE_BEFORE), (5, "new5", RowKind.UPDATE_AFTER),
        (6, "x", RowKind.DELETE), (6, "back6", RowKind.INSERT),              # re-inserted after delete
        (7, "only-before", RowKind.UPDATE_BEFORE),                           # moved away: deleted
    ]
    result = write(writer, tmp_path, frame(spark, rows, "id bigint, name string"), 0)
    assert result.state["rows"] == len(rows)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "a2"), (3, "c"), (5, "new5"), (6, "back6")]


@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "plain"])
def test_rows_collected_on_the_driver_apply_by_key_in_the_commit_transaction_without_a_spark_job(
        spark, db, tmp_path, upsert):
    """A small batch of a multi-table stream reaches the sink already collected (runtime.table_routing):
    its changes are staged and applied in the commit's one transaction, no Spark job and no
    staging table left behind; a fenced attempt commits none of them, its retry commits them once."""
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (4, 'old4'), (5, 'old5'), (6, 'old6')")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"], enable_upsert=upsert), context(spark, table))
    rows = [(1, "a", RowKind.INSERT), (1, "a2", RowKind.UPDATE_AFTER), (2, "b", RowKind.INSERT),
            (2, "b", RowKind.DELETE), (4, "old4", RowKind.DELETE), (5, "new5", RowKind.UPDATE_AFTER),
            (6, "x", RowKind.DELETE), (6, "back6", RowKind.INSERT), (7, "only-before", RowKind.UPDATE_BEFORE)]
    batch = on_driver(frame(spark, rows, "id bigint, name string"))

    def zombie():
        raise RuntimeError("attempt fenced")

    with pytest.raises(RuntimeError, match="fenced"):
        write(writer, tmp_path / "fenced", batch, 0, fence=zombie)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(4, "old4"), (5, "old5"), (6, "old6")]
    results = []
    assert spark_jobs_of(spark, lambda: results.append(write(writer, tmp_path / "log", batch, 0))) == []
    assert results[0].state["rows"] == len(rows)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "a2"), (5, "new5"), (6, "back6")]
    here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
    assert query(db, "SELECT table_name FROM information_schema.tables WHERE "
                     f"table_name LIKE 'seatide_stage%' AND table_schema = {here}") == []


@pytest.mark.parametrize("upsert", [True, False], ids=["upsert", "plain"])
def test_a_key_change_moves_the_row_instead_of_copying_it(spark, db, tmp_path, upsert):
    """UPDATE t SET id = 500 WHERE id = 7 arrives as UPDATE_BEFORE(7), UPDATE_AFTER(500): the
    UPDATE_BEFORE is the last change of key 7, so 7 is deleted (finding 1 of issue 22)."""
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (7, 'seven'), (8, 'eight')")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"], enable_upsert=upsert), context(spark, table))
    rows = [(7, "seven", RowKind.UPDATE_BEFORE), (500, "seven", RowKind.UPDATE_AFTER),
            (8, "eight", RowKind.UPDATE_BEFORE), (8, "eight!", RowKind.UPDATE_AFTER)]
    write(writer, tmp_path, frame(spark, rows, "id bigint, name string"), 0)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(8, "eight!"), (500, "seven")]


def test_without_upsert_the_net_change_per_key_is_applied(spark, db, tmp_path):
    """enable_upsert = false: a row inserted and updated in one batch lands with its last values,
    and DELETE k, INSERT k of an existing k replaces it instead of failing on the duplicate key,
    on every replay (finding 2 of issue 22)."""
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO {table} VALUES (2, 'two'), (3, 'three')")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"], enable_upsert=False), context(spark, table))
    rows = [(1, "a", RowKind.INSERT), (1, "a", RowKind.UPDATE_BEFORE), (1, "b", RowKind.UPDATE_AFTER),
            (2, "two", RowKind.DELETE), (2, "new two", RowKind.INSERT),
            (3, "three", RowKind.UPDATE_BEFORE), (3, "three!", RowKind.UPDATE_AFTER),
            (4, "d", RowKind.INSERT), (4, "d", RowKind.DELETE)]
    write(writer, tmp_path, frame(spark, rows, "id bigint, name string"), 0)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "b"), (2, "new two"), (3, "three!")]


def test_upsert_into_a_table_without_a_key_on_primary_keys_is_refused(spark, db, tmp_path):
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20))")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    with pytest.raises(JdbcSinkError, match=r"no primary key or unique index on \(id\)"):
        write(writer, tmp_path, inserts(spark, [1]), 0)
    execute(db, f"CREATE UNIQUE INDEX {table}_id ON {table} (id)")    # a unique index serves as well
    write(open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table)), tmp_path,
          inserts(spark, [1, 1]), 0)
    assert query(db, f"SELECT id, name FROM {table}") == [(1, "n1")]


def test_without_upsert_updates_existing_keys_and_inserts_new_ones_without_a_unique_index(spark, db, tmp_path):
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20))",       # no key: no upserts possible
            f"INSERT INTO {table} VALUES (1, 'one')")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"], enable_upsert=False), context(spark, table))
    write(writer, tmp_path, frame(spark, [(1, "uno", RowKind.UPDATE_AFTER), (2, "two", RowKind.INSERT)],
                                  "id bigint, name string"), 0)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "uno"), (2, "two")]
    # an INSERT of a key the target has (a change seen again) leaves one row with its values
    write(writer, tmp_path, frame(spark, [(2, "again", RowKind.INSERT)], "id bigint, name string"), 1)
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "uno"), (2, "again")]


def test_changes_without_primary_keys_are_refused_when_the_job_is_loaded(db):
    url, user = db
    text = f"""
source {{ FakeSource {{ schema = {{ fields {{ id = bigint }} }}, rows = [{{ kind = DELETE, fields = [1] }}] }} }}
sink {{ Jdbc {{ url = "{url}", user = "{user}", table = "t" }} }}
"""
    with pytest.raises(ConfigError, match="cannot apply DELETE.*primary_keys"):
        load_job_text(text)
    keyed = text.replace('table = "t"', 'table = "t", primary_keys = ["id"]')
    assert load_job_text(keyed).sinks[0].plugin.accepted_row_kinds == frozenset(RowKind)


def test_bad_options_name_the_option(db):
    with pytest.raises(OptionError) as error:
        make_sink(db)
    assert error.value.option == "table"
    with pytest.raises(OptionError) as error:
        make_sink(db, query="UPDATE t SET a = ? WHERE id = ?")
    assert error.value.option == "query"
    with pytest.raises(OptionError) as error:
        make_sink(db, table="t", data_save_mode="CUSTOM_PROCESSING")
    assert error.value.option == "custom_sql"


TYPED = [  # (field, SeaTunnel type, Spark DDL type, value)
    ("c_tiny", "tinyint", "tinyint", 7),
    ("c_small", "smallint", "smallint", -300),
    ("c_int", "int", "int", 70000),
    ("c_big", "bigint", "bigint", 2**40),
    ("c_float", "float", "float", 1.5),
    ("c_double", "double", "double", 2.25),
    ("c_dec", "decimal(10, 2)", "decimal(10,2)", Decimal("12.34")),
    ("c_str", "string", "string", "héllo"),
    ("c_bool", "boolean", "boolean", True),
    ("c_bytes", "bytes", "binary", b"\x00\x01\xff"),
    ("c_date", "date", "date", dt.date(2024, 2, 29)),
    ("c_time", "time", "time(6)", dt.time(12, 34, 56, 123456)),
    ("c_ts", "timestamp", "timestamp_ntz", dt.datetime(2024, 1, 2, 3, 4, 5, 678901)),
]


def _normal(value):
    if isinstance(value, dt.timedelta):    # PyMySQL returns TIME as a timedelta
        return (dt.datetime.min + value).time()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


@pytest.mark.parametrize("path", ["spark", "driver"])
def test_table_created_from_the_input_schema_round_trips_every_type(spark, db, tmp_path, path):
    table = table_name()
    given = on_driver if path == "driver" else (lambda df: df)
    ddl = ", ".join(f"{name} {spark_type}" for name, _, spark_type, _ in TYPED)
    values = tuple(v for *_, v in TYPED)
    writer = open_sink(make_sink(db, table=table, primary_keys=["c_int"]), context(spark, table))
    write(writer, tmp_path, given(frame(spark, [(*values, RowKind.INSERT)], ddl)), 0)
    (row,) = query(db, f"SELECT {', '.join(n for n, *_ in TYPED)} FROM {table}")
    got = tuple(_normal(v) for v in row)
    expected = tuple(bool(v) if isinstance(v, bool) else v for v in values)
    assert tuple(bool(g) if isinstance(e, bool) else g for g, e in zip(got, expected)) == expected
    # the created table has the primary key, so a later upsert of the same key replaces the row
    write(writer, tmp_path, given(frame(spark, [(*values[:-1], dt.datetime(2025, 1, 1), RowKind.UPDATE_AFTER)], ddl)), 1)
    assert query(db, f"SELECT COUNT(*), MAX(c_ts) FROM {table}") == [(1, dt.datetime(2025, 1, 1))]


@pytest.mark.parametrize("path", ["spark", "driver"])
def test_a_float_lands_in_a_wider_column_as_spark_binds_it_on_both_paths(spark, db, tmp_path, path):
    """Spark binds a FLOAT as 4 bytes (pgjdbc) or as Java's Float.toString (Connector/J); the
    driver's rows hold it as a double (0.1 is 0.10000000149011612 there): a wider column must get
    what Spark's writer gives it, on either path (outside reviews, stop 66). PostgreSQL casts the 4
    bytes to the column (a NUMERIC gets 6 digits, a DOUBLE the widened value); Java 17 writes
    351914784f as 3.51914784E8, not its shortest decimal 351914780."""
    import decimal

    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, n NUMERIC(25, 15))")
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    df = frame(spark, [(1, 0.1, 0.1, RowKind.INSERT), (2, 123456.79, 123456.79, RowKind.INSERT),
                       (3, 351914784.0, 351914784.0, RowKind.INSERT)], "id bigint, v float, n float")
    write(writer, tmp_path, on_driver(df) if path == "driver" else df, 0)
    pg = "postgresql" in db[0]
    assert query(db, f"SELECT id, v, n FROM {table} ORDER BY id") == [
        (1, 0.10000000149011612 if pg else 0.1, decimal.Decimal("0.1")),
        (2, 123456.7890625 if pg else 123456.79, decimal.Decimal("123457" if pg else "123456.79")),
        (3, 351914784.0, decimal.Decimal("351915000" if pg else "351914784"))]


@pytest.mark.parametrize("path", ["spark", "driver"])
def test_a_column_named_with_a_percent_sign_is_written_on_both_paths(spark, db, tmp_path, path):
    """psycopg reads a % anywhere in a statement with parameters as a placeholder's (outside
    review, stop 66): the driver's staging INSERT named such a column and failed every batch."""
    table = table_name()
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"]), context(spark, table))
    df = frame(spark, [(1, "a", RowKind.INSERT), (2, "b", RowKind.INSERT)], "id bigint, `share%` string")
    write(writer, tmp_path, on_driver(df) if path == "driver" else df, 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(2,)]


def test_commit_records_in_a_schema_named_with_a_percent_sign(db):
    """Every statement of the commit records that takes parameters names their table, which a %
    in its schema's (MySQL: database's) name made a placeholder to the client."""
    from seatide.connectors.jdbc.commit_record import CommitRecords
    from seatide.connectors.jdbc.dialect import Dialect

    url, user = db
    parsed = JdbcUrl.parse(url)
    schema = f"c%{table_name()}"
    records = CommitRecords(Dialect(parsed.dialect), schema)
    execute(db, f"CREATE SCHEMA {records.dialect.quote(schema)}")
    try:
        conn = parsed.connect(user, autocommit=True)
        cursor = conn.cursor()
        records.create(cursor)
        records.insert(cursor, "T_j_1_0_L_3", "j/sink[0]", 3, 0)
        records.set_rows(cursor, "T_j_1_0_L_3", 7)
        assert records.rows_of(cursor, "T_j_1_0_L_3") == 7 and records.any_for(cursor, "j/sink[0]", "T_j_1_0_L_")
        records.prune(cursor, "j/sink[0]", "T_j_1_0_L_", 4)
        assert records.rows_of(cursor, "T_j_1_0_L_3") is None
        conn.close()
    finally:
        execute(db, f"DROP SCHEMA {records.dialect.quote(schema)}" + (" CASCADE" if "postgresql" in url else ""))


def test_save_modes_before_the_first_batch(spark, db, tmp_path):
    table = table_name()
    ddl = "id bigint, name string"
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20), extra INT)",
            f"INSERT INTO {table} VALUES (100, 'kept', 1)")

    def run(job: str, **options):
        writer = open_sink(make_sink(db, table=table, **options), context(spark, job))
        log = tmp_path / job
        return write_exactly_once(writer, SinkCommitLog(str(log)), inserts(spark, [1]), 0, f"T_{job}_1_0_L_0")

    with pytest.raises(JdbcSinkError, match="ERROR_WHEN_DATA_EXISTS"):
        run("j1", data_save_mode="ERROR_WHEN_DATA_EXISTS")
    run("j2", data_save_mode="CUSTOM_PROCESSING", custom_sql=f"UPDATE {table} SET name = 'custom' WHERE id = 100")
    assert query(db, f"SELECT id, name FROM {table} ORDER BY id") == [(1, "n1"), (100, "custom")]
    run("j3", data_save_mode="DROP_DATA")
    assert query(db, f"SELECT id, name, extra FROM {table}") == [(1, "n1", None)]
    run("j4", schema_save_mode="RECREATE_SCHEMA")      # dropped and created from the input: no 'extra'
    assert query(db, f"SELECT * FROM {table}") == [(1, "n1")]
    missing = open_sink(make_sink(db, table=table_name(), schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST"),
                        context(spark, "j5"))
    with pytest.raises(JdbcSinkError, match="ERROR_WHEN_SCHEMA_NOT_EXIST"):
        write_exactly_once(missing, SinkCommitLog(str(tmp_path / "j5")), inserts(spark, [1]), 0, txn("j5", 0, "X"))


def test_query_mode_runs_the_users_insert_once_per_row(spark, db, tmp_path):
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, label VARCHAR(40))")
    sink = make_sink(db, query=f"INSERT INTO {table} (id, label) VALUES (?, CONCAT('x-', ?, '?%'))")
    writer = open_sink(sink, context(spark, table))
    write(writer, tmp_path, inserts(spark, [1, 2]), 0)
    write(writer, tmp_path / "lost", inserts(spark, [1, 2]), 0)       # committed in the database already
    assert query(db, f"SELECT id, label FROM {table} ORDER BY id") == [(1, "x-n1?%"), (2, "x-n2?%")]


def test_mysql_stages_without_transactions_where_spark_runs_each_task_once(spark, db, tmp_path):
    if "postgresql" in db[0]:
        pytest.skip("MySQL/MariaDB: PostgreSQL stages into UNLOGGED tables")
    table = table_name()
    writer = open_sink(make_sink(db, table=table), context(spark, table))
    assert staging_engines_at_commit(db, writer, tmp_path, inserts(spark, range(50))) == ["MyISAM"]
    assert query(db, f"SELECT COUNT(*), SUM(id) FROM {table}") == [(50, sum(range(50)))]


def test_mysql_stages_in_the_default_engine_where_the_server_refuses_the_chosen_one(spark, db, tmp_path):
    if "postgresql" in db[0]:
        pytest.skip("MySQL/MariaDB only")
    table = table_name()
    writer = open_sink(make_sink(db, table=table), context(spark, table))
    writer.stage_engine = "NoSuchEngine"      # refused as MySQL's disabled_storage_engines would
    assert staging_engines_at_commit(db, writer, tmp_path, inserts(spark, range(7))) == ["InnoDB"]
    assert writer.stage_engine is None
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(7,)]


@pytest.mark.parametrize("master, speculation, once", [
    ("local", None, True), ("local[2]", "false", True), ("local[*]", None, True),
    ("local[2,3]", None, False), ("spark://node:7077", None, False), ("local[2]", "true", False),
])
def test_a_task_runs_once_only_on_a_local_master_without_retries_or_speculation(master, speculation, once):
    from seatide.connectors.jdbc.staging import runs_each_task_once

    assert runs_each_task_once(master, speculation) is once


def _open_writes_into(db, table: str) -> int:
    """Rows another session has written into ``table`` in a transaction still open."""
    if "postgresql" in db[0]:
        return query(db, "SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                         f"WHERE c.relname = '{table}' AND l.mode = 'RowExclusiveLock' AND l.granted")[0][0]
    url, user = db
    conn = JdbcUrl.parse(url).connect(user, autocommit=True)
    try:   # MariaDB reads what other transactions have not committed yet when asked to
        cursor = conn.cursor()
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
        cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                       f"AND table_name = '{table}'")
        if cursor.fetchone()[0] == 0:     # the save modes have not made it yet
            return 0
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        return cursor.fetchone()[0]
    finally:
        conn.close()


def test_each_table_is_applied_as_its_staging_ends_and_a_later_failure_commits_no_table(spark, db, tmp_path):
    from pyspark.sql import functions as F

    names = [table_name(), table_name()]
    writer = routes_writer(spark, db, names, names[0])
    gate = str(tmp_path / "gate")

    def held(fail: bool):
        # the second table's staging waits in its Python worker until the test opens the gate
        def wait(value):
            import os
            import time
            deadline = time.time() + 120
            while not os.path.exists(gate) and time.time() < deadline:
                time.sleep(0.05)
            if fail:
                raise RuntimeError("staging failed")
            return value
        return frame(spark, [(i, f"b{i}", RowKind.INSERT) for i in range(6)], "id bigint, name string") \
            .withColumn("id", F.udf(wait, "bigint")(F.col("id")))

    def attempt(fail: bool):
        frames = TableFrames({0: inserts(spark, range(4)), 1: held(fail)},
                             schema_of=lambda i: inserts(spark, range(1)).schema)
        return write(writer, tmp_path / "log", frames, 0)

    failing = threading.Thread(target=lambda: pytest.raises(Exception, attempt, True), daemon=True)
    failing.start()
    deadline = time.monotonic() + 90
    while _open_writes_into(db, names[0]) == 0:
        assert time.monotonic() < deadline, "the first table was not applied while the second still staged"
        time.sleep(0.1)
    (tmp_path / "gate").touch()
    failing.join(90)
    assert not failing.is_alive()
    assert query(db, f"SELECT COUNT(*) FROM {names[0]}") == [(0,)], "a batch that failed committed a table"
    assert query(db, f"SELECT COUNT(*) FROM seatide_sink_commits WHERE transaction_id = '{txn(names[0], 0)}'") \
        == [(0,)]
    assert attempt(False).state["rows"] == 10
    assert [query(db, f"SELECT COUNT(*) FROM {n}")[0][0] for n in names] == [4, 6]
    assert query(db, f"SELECT row_count FROM seatide_sink_commits WHERE transaction_id = '{txn(names[0], 0)}'") \
        == [(10,)]


def test_commit_records_are_pruned_past_the_retained_batches(spark, db, tmp_path):
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20))")
    writer = open_sink(make_sink(db, table=table, data_save_mode="DROP_DATA"), context(spark, "prune"))
    log = SinkCommitLog(str(tmp_path))
    for batch in range(5):
        write_exactly_once(writer, log, inserts(spark, [batch]), batch, f"T_prune_1_0_L_{batch}")
    kept = query(db, "SELECT batch_id FROM seatide_sink_commits WHERE sink_id = 'prune/1/sink[0]' ORDER BY batch_id")
    assert kept == [(-1,), (2,), (3,), (4,)]     # checkpoints_retained = 2; -1: DROP_DATA, carried out once
    write_exactly_once(writer, SinkCommitLog(str(tmp_path / "fresh")), inserts(spark, [9]), 0, "T_prune_1_0_M_0")
    kept = query(db, "SELECT transaction_id FROM seatide_sink_commits WHERE sink_id = 'prune/1/sink[0]' "
                     "AND batch_id >= 0")
    assert kept == [("T_prune_1_0_M_0",)]  # a fresh lineage drops the old one's records


def test_checkpointed_job_writes_every_row_once_even_when_its_last_batch_is_replayed(spark, db, tmp_path):
    """FakeSource -> Jdbc in micro-batches; then the last batch replays with the runtime's log lost."""
    import os

    from tests.e2e.harness import InProcessCluster
    from tests.e2e.test_jobs import _rerun_same_checkpoint

    url, user = db
    table = table_name()
    text = f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 300, job.retry.interval.seconds = 0 }}
source {{ FakeSource {{ row.num = 900, split.num = 3, sequence.field = "id",
                       schema = {{ fields {{ id = bigint, name = string, score = double }} }} }} }}
sink {{ Jdbc {{ url = "{url}", user = "{user}", table = "{table}", primary_keys = ["id"] }} }}
"""
    local = InProcessCluster(spark, str(tmp_path / "data"))
    run = local.run(text)
    assert run.status == "FINISHED", run.error
    assert query(db, f"SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM {table}") == [(900, 900, 0, 899)]
    (pipeline,) = run.pipelines()
    assert pipeline.rows_written == 900 and len(run.checkpoints()) >= 3
    # A crash after the database commit of the last batch, before Spark's commit and the sink's log.
    spark_dir = os.path.join(pipeline.checkpoint_dir, "spark")
    last = max(int(n) for n in os.listdir(os.path.join(spark_dir, "commits")) if n.isdigit())
    os.remove(os.path.join(spark_dir, "commits", str(last)))
    (sink_log,) = os.listdir(os.path.join(pipeline.checkpoint_dir, "sinks"))
    os.remove(os.path.join(pipeline.checkpoint_dir, "sinks", sink_log, "commit", f"{last}.json"))
    execute(db, f"UPDATE {table} SET name = 'untouched'")
    replay = _rerun_same_checkpoint(local, run.job(), pipeline)
    assert replay.status == "FINISHED", replay.error
    assert query(db, f"SELECT COUNT(*), MIN(name), MAX(name) FROM {table}") == [(900, "untouched", "untouched")]


def test_mysql_connector_class_from_seatunnel_configs_runs_on_the_bundled_driver(spark, db, tmp_path):
    if "mariadb" not in db[0]:
        pytest.skip("the bundled MariaDB driver stands in for MySQL's")
    table = table_name()
    url = db[0].replace("jdbc:mariadb:", "jdbc:mysql:")
    writer = open_sink(make_sink((url, db[1]), table=table, driver="com.mysql.cj.jdbc.Driver"), context(spark, table))
    assert writer.driver == "org.mariadb.jdbc.Driver"
    write(writer, tmp_path, inserts(spark, [1, 2]), 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(2,)]
    with pytest.raises(JdbcSinkError, match="option 'driver'"):
        open_sink(make_sink(db, table=table, driver="org.example.NoSuchDriver"), context(spark, table))


def test_field_ide_renames_fields_and_keys(spark, db, tmp_path):
    table = table_name()
    writer = open_sink(make_sink(db, table=table, primary_keys=["id"], field_ide="UPPERCASE"), context(spark, table))
    write(writer, tmp_path, frame(spark, [(1, "a", RowKind.INSERT), (1, "b", RowKind.UPDATE_AFTER)],
                                  "id bigint, name string"), 0)
    here = "current_schema()" if "postgresql" in db[0] else "DATABASE()"
    columns = query(db, f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' "
                        f"AND table_schema = {here} ORDER BY ordinal_position")
    assert columns == [("ID",), ("NAME",)]
    assert query(db, f'SELECT * FROM {table}') == [(1, "b")]


def test_a_zombie_held_before_its_save_modes_never_empties_what_its_replacement_committed(spark, db, tmp_path,
                                                                                      monkeypatch):
    """Issue 21 finding 3: DROP_DATA runs before a sink's first batch. A zombie held just before
    it wakes after its replacement applied it and committed batch 0: its DELETE must not land.
    The save modes are recorded in the target database, in the transaction that applies them,
    under a lock the two writers share: whoever comes second finds them done."""
    from seatide import failpoints

    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT, name VARCHAR(20))", f"INSERT INTO {table} VALUES (100, 'old')")
    gate = tmp_path / "gate"
    monkeypatch.setitem(failpoints._POINTS, "sink.save_modes", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "sink.save_modes", 0)
    zombie = open_sink(make_sink(db, table=table, data_save_mode="DROP_DATA"), context(spark, "zj"))
    outcome: dict = {}

    def zombie_batch():
        try:
            write(zombie, tmp_path / "zombie", inserts(spark, [1, 2]), 0)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=zombie_batch)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while failpoints._HITS["sink.save_modes"] < 1:
            assert time.monotonic() < deadline, "the zombie never reached its save modes"
            time.sleep(0.05)
        monkeypatch.delitem(failpoints._POINTS, "sink.save_modes")
        replacement = open_sink(make_sink(db, table=table, data_save_mode="DROP_DATA"), context(spark, "zj"))
        write(replacement, tmp_path / "replacement", inserts(spark, [1, 2]), 0)
        assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
    finally:
        gate.touch()
        thread.join(120)
    assert "error" not in outcome, outcome
    assert query(db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)], "the zombie's DROP_DATA landed"
