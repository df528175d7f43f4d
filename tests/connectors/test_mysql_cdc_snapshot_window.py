"""MySQL-CDC's window between the tables' description and a first snapshot's position
(snapshot_window.py), and the description's metadata lock (catalog.described_at): what a
statement there does to the first batches. From an outside review of 9ca7c19..887971c."""

from __future__ import annotations

import time

import pytest

from tests.connectors.cdc_mysql_server import private_mariadb  # noqa: F401  (a fixture)
from tests.connectors.test_mysql_cdc import cdc_database, read_range, source  # noqa: F401
from tests.connectors.test_mysql_cdc_describe_window import applied, stream


@pytest.mark.parametrize("before, after", [("utf8mb4", "latin1"), ("latin1", "utf8mb4")])
def test_a_table_created_again_in_another_charset_is_not_passed_over_as_the_same_table(before, after, private_mariadb,
                                                                                       cdc_database):
    """DROP + CREATE with the same COLUMN_TYPEs but another character set, between the description
    and the first batch: snapshot_window._same_table compares only name/type/precision and key, so
    it passes the DROP over as 'the same table'; the stream then decodes the new table's latin1
    bytes with the described utf8mb4 converter. Promise 1 (exact state) or 2 (refuse loudly)."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20)) CHARACTER SET {before}",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())          # the query starts
    private_mariadb.execute(f"DROP TABLE {table}",
                            f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20)) CHARACTER SET {after}",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    rows, stopped = stream(plugin, described, lambda: private_mariadb.execute(
        f"INSERT INTO {table} VALUES (2, 'caf\u00e9')"))
    if stopped is not None:          # refused loudly, naming the table: acceptable
        assert "items" in str(stopped), stopped
        return
    assert applied(rows) == {1: {"id": 1, "name": "a"}, 2: {"id": 2, "name": "caf\u00e9"}}


def resumed_stream(plugin, described, batches: int = 8):
    """The stream read batch by batch; at a schema change the query starts again as SeaTide's does:
    the tables described again, read on from the last batch's end. (rows, why it stopped; None: read on)"""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options
    from seatide.plugin.evolution import schema_change_in

    def reader_of(found, schema):
        return MySqlCdcReader(stream_options(plugin.server_config(), found, schema.json(), "initial", None, 1000,
                                             None, "evolve"))

    reader = reader_of(*described)
    rows, start, changes = [], reader.initialOffset(), []
    for _ in range(batches):
        try:
            end = reader.latestOffset(start, ReadAllAvailable())
            rows += read_range(reader, start, end)
        except Exception as exc:  # noqa: BLE001
            change = schema_change_in(str(exc))
            if not change:
                return rows, str(exc), changes
            changes.append(change)
            reader = reader_of(*plugin.discover(plugin.server_config()))
            continue
        start = end
    return rows, None, changes


def test_a_truncate_after_an_alter_before_the_first_batch_is_not_refused(private_mariadb, cdc_database):
    """ALTER then TRUNCATE of the table between its description and the first batch: the snapshot,
    read after both, holds the outcome, yet snapshot_window leaves the TRUNCATE to the stream
    ('passing it over would pass the ALTER over too'), which refuses it: start over, though
    nothing is lost. Promise 2: nothing it can follow is refused."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())
    private_mariadb.execute(f"ALTER TABLE {table} ADD COLUMN c1 INT NOT NULL DEFAULT 7", f"TRUNCATE TABLE {table}",
                            f"INSERT INTO {table} VALUES (3, 'c', 5)")
    rows, stopped, changes = resumed_stream(plugin, described)
    assert stopped is None, (stopped, changes)
    # the query started again once, with the ALTER in the shape; the snapshot holds the rest
    assert [c["table"] for c in changes] == [table], changes
    assert applied(rows) == {3: {"id": 3, "name": "c", "c1": 5}}


def test_a_description_blocked_behind_a_queued_alter_fails_in_bounded_time_naming_the_blocker(
        private_mariadb, cdc_database):
    """An application's open transaction has read the table; an ALTER of it waits for that
    transaction, and the description's lock (catalog.described_at) queues behind the ALTER. With
    the server's lock_wait_timeout (a day on MariaDB, a year on MySQL) the query's start hung with
    no message: each try now waits describe_lock_wait_s, lets go, and after the last the job fails
    naming the table and the waiting ALTER; the ALTER is not held up by us afterwards."""
    import dataclasses
    import threading

    from seatide.plugin.base import PermanentError
    from tests.connectors.test_mysql_cdc_describe_window import wait_for

    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))")
    plugin = source(private_mariadb, [table])
    config = dataclasses.replace(plugin.server_config(), describe_lock_wait_s=1, describe_lock_attempts=2)
    app = private_mariadb.connect()
    cur = app.cursor()
    cur.execute("START TRANSACTION")
    cur.execute(f"SELECT * FROM {table}")           # the application's long transaction
    altering = threading.Thread(target=lambda: private_mariadb.execute(f"ALTER TABLE {table} ADD COLUMN c1 INT"))
    altering.start()

    def waiting(text):
        with private_mariadb.connect() as conn, conn.cursor() as c:
            c.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                      "AND STATE LIKE '%%metadata lock%%'", (text,))
            return c.fetchone()[0] > 0

    try:
        wait_for(lambda: waiting("ALTER TABLE%"), "the ALTER to queue")
        started = time.monotonic()
        with pytest.raises(PermanentError) as refused:
            plugin.discover(config)
        took = time.monotonic() - started
        assert took < 10, took
        text = str(refused.value)
        assert f"{cdc_database}.items could not be described" in text, text
        assert "ALTER TABLE" in text and "thread" in text and "end that transaction" in text, text
        assert not waiting("SELECT 1 FROM%LIMIT 0"), "the description still waits"
    finally:
        cur.execute("ROLLBACK")
        app.close()
        altering.join(60)
    assert plugin.discover(plugin.server_config())[0][0].live[-1][0] == "c1"    # the ALTER went through


def test_a_statement_logged_load_data_before_the_first_batch_is_passed_over_like_other_statements(
        private_mariadb, cdc_database, tmp_path):
    """887971c passes over a change of the table logged as text between its description and the first
    batch (the snapshot holds it). LOAD DATA logged as text is an Execute_load_query event, not a
    Query one: snapshot_window._statements looks at Query events only, so the stream refuses it
    (start over) though the snapshot holds its rows, as it does a statement-logged DELETE's."""
    data = tmp_path / "rows.tsv"
    data.write_text("2\tb\n")
    data.chmod(0o644)
    tmp_path.chmod(0o755)
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())
    private_mariadb.execute("SET SESSION binlog_format = 'STATEMENT'",
                            f"LOAD DATA INFILE '{data}' INTO TABLE {table}", "SET SESSION binlog_format = 'ROW'")
    rows, stopped = stream(plugin, described)
    assert stopped is None, stopped
    assert applied(rows) == {1: {"id": 1, "name": "a"}, 2: {"id": 2, "name": "b"}}


@pytest.mark.parametrize("recreated", ["dropped", "created again with other columns"])
def test_a_table_dropped_after_an_alter_before_the_first_batch_is_refused_with_the_way_out(
        recreated, private_mariadb, cdc_database):
    """ALTER then DROP (and maybe CREATE with other columns) between the description and the first
    batch: snapshot_window leaves a DROP after an ALTER 'to the stream, which refuses it', but the
    snapshot's splits are read before the stream gets there, and read a table that is gone (or has
    other columns): the job fails with the server's raw error, not SeaTide's refusal and its way out
    (the raw 1054 116cea6 meant to end). Promise 2."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())
    after = [f"CREATE TABLE {table} (id INT PRIMARY KEY, other INT)"] if recreated != "dropped" else []
    private_mariadb.execute(f"ALTER TABLE {table} ADD COLUMN c1 INT", f"DROP TABLE {table}", *after)
    rows, stopped = stream(plugin, described)
    assert isinstance(stopped, str) and "was dropped" in stopped and "items" in stopped, stopped
