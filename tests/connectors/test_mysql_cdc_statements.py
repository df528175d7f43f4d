"""MySQL-CDC and statements in the binlog (issue 30, findings 4, 19 and 20), on a private MariaDB:
a change of a captured table that the binlog holds as a statement, not as rows (DML of a session
with binlog_format = STATEMENT, TRUNCATE, DROP TABLE), fails the stream naming the table and the
way out, with or without a comment before it; the planner starts a batch at every ALTER form the
reader follows; and one classifier (mysql_cdc/statements.py) reads them all."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PermanentError
from tests.connectors.test_mysql_cdc import read_range, reader_of, source  # noqa: F401
from tests.connectors.test_mysql_cdc import cdc_database  # noqa: F401 - the fixture


def _streamed(server, table: str, server_id: int):
    """A reader of ``table`` and the offset where the binlog stands now."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, note VARCHAR(20))",
                   f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two')")
    reader = reader_of(server, [table], f"server-id = {server_id}")
    return reader, reader.latestOffset(reader.initialOffset(), ReadAllAvailable())


def _read_after(reader, start) -> list[dict]:
    """The rows of every batch planned from ``start`` until the binlog's end."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    rows = []
    for _ in range(5):
        end = reader.latestOffset(start, ReadAllAvailable())
        if end == start:
            return rows
        rows += read_range(reader, start, end)
        start = end
    raise AssertionError("the stream never reached the end of the binlog")


@pytest.mark.parametrize("statement", [
    "UPDATE {t} SET note = 'changed' WHERE id = 1",
    "/* app */ DELETE FROM {t} WHERE id = 2",
    "INSERT INTO {t} VALUES (3, 'three')",
    "REPLACE INTO {t} VALUES (1, 'replaced')",
    "LOAD DATA INFILE '{f}' REPLACE INTO TABLE {t} FIELDS TERMINATED BY ','",
    "UPDATE {t} JOIN audit ON audit.id = {t}.id SET {t}.note = audit.note",
    "UPDATE audit JOIN ({t}) ON audit.id = {t}.id SET {t}.note = audit.note",
], ids=["update", "delete-after-a-comment", "insert", "replace", "load-data", "update-join",
        "update-join-parenthesized"])
def test_dml_a_session_logs_as_a_statement_fails_the_stream_naming_table_setting_and_way_out(
        private_mariadb, cdc_database, statement, tmp_path):  # noqa: F811
    """Finding 4: SET SESSION binlog_format = 'STATEMENT' then a change of a captured table: the
    binlog holds the statement, no rows. Read on without it, the target never gets the change."""
    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5420)
    server.execute(f"CREATE TABLE {cdc_database}.audit (id INT PRIMARY KEY, note VARCHAR(20))",
                   f"INSERT INTO {cdc_database}.audit VALUES (1, 'from audit')")
    rows = tmp_path / "rows.csv"
    rows.write_text("1,loaded\n5,five\n")
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute(statement.format(t="orders", f=rows))
    with pytest.raises(PermanentError) as caught:
        _read_after(reader, start)
    message = str(caught.value)
    assert table in message and "binlog_format" in message and "submit it again" in message, message


def test_a_session_logging_statements_for_other_tables_is_passed_over(private_mariadb, cdc_database,  # noqa: F811
                                                                   tmp_path):
    """Only a captured table's statements stop the stream: another table's, and reads of a captured
    one into another, change nothing the job reads."""
    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5421)
    server.execute(f"CREATE TABLE {cdc_database}.audit (id INT PRIMARY KEY, note VARCHAR(20))")
    rows = tmp_path / "rows.csv"
    rows.write_text("1,loaded\n")
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute("INSERT INTO audit SELECT id, note FROM orders")
        cur.execute("UPDATE audit SET note = 'x'")
        cur.execute(f"LOAD DATA INFILE '{rows}' REPLACE INTO TABLE audit FIELDS TERMINATED BY ','")
    server.execute(f"INSERT INTO {table} VALUES (3, 'three')")
    assert [r["id"] for r in _read_after(reader, start)] == [3]


@pytest.mark.parametrize("statement", ["/* app */ TRUNCATE TABLE {t}", "-- app\nTRUNCATE {t}",
                                       "DROP TABLE {t}", "/* app */ DROP TABLE IF EXISTS `other`, {t}"],
                         ids=["truncate-after-a-comment", "truncate-after-a-line-comment", "drop", "drop-two"])
def test_a_captured_table_emptied_or_dropped_fails_the_stream_naming_it(private_mariadb, cdc_database,
                                                                         statement):  # noqa: F811
    """Finding 19: the TRUNCATE check was anchored at the statement's start, so a comment before it
    hid it; a DROP TABLE of a captured table was passed over, and every later change lost."""
    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5422)
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute(statement.format(t="orders"))
    with pytest.raises(PermanentError) as caught:
        _read_after(reader, start)
    message = str(caught.value)
    assert table in message and "submit it again" in message, message


@pytest.mark.parametrize("alter", ["ALTER ONLINE TABLE {t} ADD COLUMN extra INT",
                                   "ALTER IGNORE TABLE {t} ADD COLUMN extra INT",
                                   "ALTER /* c */ TABLE {t} ADD COLUMN extra INT",
                                   "/* app */ ALTER TABLE {t} ADD COLUMN extra INT"],
                         ids=["online", "ignore", "comment-inside", "comment-before"])
def test_the_planner_starts_a_batch_at_every_alter_form_the_reader_follows(private_mariadb, cdc_database,
                                                                           alter):  # noqa: F811
    """Finding 20: the planner's pattern missed ALTER ONLINE / IGNORE / with a comment inside, which
    the reader follows, so the change was met inside a planned batch's task, not between batches."""
    from seatide.connectors.mysql_cdc.batch_end import batch_end
    from seatide.connectors.mysql_cdc.catalog import current_position
    from seatide.connectors.mysql_cdc.position import BinlogPosition

    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5423)
    server.execute(f"INSERT INTO {table} VALUES (3, 'three')")
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute(alter.format(t="orders"))
    server.execute(f"INSERT INTO {table} VALUES (4, 'four', 4)")
    tables = reader._tables()
    with server.connect(database=None) as conn:
        begin = BinlogPosition.of(start["file"], start["pos"])
        now = current_position(conn)
        first = batch_end(conn, begin, now, tables, 1_000_000)
        assert first < now, "the batch ran over the ALTER TABLE"
        opening: list = []
        batch_end(conn, first, now, tables, 1_000_000, opening=opening)
    assert len(opening) == 1 and "extra" in opening[0][1], opening


@pytest.mark.parametrize("statement, kind, tables", [
    ("/* app */ TRUNCATE TABLE t", "truncate", [("db", "t")]),
    ("-- app\nTRUNCATE `s`.`t`", "truncate", [("s", "t")]),
    ("DROP TABLE IF EXISTS `o`, shop.t /* generated by server */", "drop", [("db", "o"), ("shop", "t")]),
    ("DROP TEMPORARY TABLE t", None, []),
    ("DROP DATABASE shop", "drop", [("shop", None)]),
    ("CREATE OR REPLACE TABLE t (id int)", "drop", [("db", "t")]),
    ("CREATE TABLE IF NOT EXISTS t (id int)", "create", [("db", "t")]),
    ("ALTER ONLINE IGNORE TABLE shop2.items ADD c int", "alter", [("shop2", "items")]),
    ("ALTER /*c*/ TABLE x ADD y int", "alter", [("db", "x")]),
    ("/*!40000 ALTER TABLE t DISABLE KEYS */", "alter", [("db", "t")]),
    ("RENAME TABLE a TO b, s.c TO s.d", "rename", [("db", "a"), ("db", "b"), ("s", "c"), ("s", "d")]),
    ("INSERT LOW_PRIORITY IGNORE INTO `a`.`b` (x) SELECT * FROM c", "dml", [("a", "b")]),
    ("REPLACE INTO t VALUES (1)", "dml", [("db", "t")]),
    ("update t as x set a = 1", "dml", [("db", "t")]),
    ("UPDATE a JOIN (SELECT 1) x ON 1 LEFT JOIN b ON f(1, 2), c SET a.x = 1", "dml",
     [("db", "a"), ("db", "b"), ("db", "c")]),
    # review 30, F4: a table reference in parentheses is a table (or a join of tables), not a derived table
    ("UPDATE x JOIN (orders) ON x.id = orders.id SET orders.a = 7", "dml", [("db", "x"), ("db", "orders")]),
    ("UPDATE x STRAIGHT_JOIN (s.orders) ON 1 SET a = 1", "dml", [("db", "x"), ("s", "orders")]),
    ("UPDATE x, ((o1 JOIN o2 USING (id)) LEFT JOIN (SELECT 1) d ON 1) SET a = 1", "dml",
     [("db", "x"), ("db", "o1"), ("db", "o2")]),
    ("UPDATE a JOIN b USING (id) SET a.x = 1", "dml", [("db", "a"), ("db", "b")]),
    ("DELETE LOW_PRIORITY QUICK FROM t WHERE id = 1", "dml", [("db", "t")]),
    ("DELETE t1, t2.* FROM t1 JOIN t2 ON t1.id = t2.id", "dml", [("db", "t1"), ("db", "t2")]),
    ("DELETE FROM t1 USING t1, s.t2 WHERE 1", "dml", [("db", "t1"), ("s", "t2")]),
    ("LOAD DATA LOCAL INFILE '/x' REPLACE INTO TABLE s.o FIELDS TERMINATED BY ','", "dml", [("s", "o")]),
    ("WITH c AS (SELECT 1) UPDATE t SET a = 1", "dml", [("db", "t")]),
    ("BEGIN", None, []), ("COMMIT", None, []), ("SAVEPOINT x", None, []),
])
def test_one_classifier_tells_each_logged_statement_and_its_tables(statement, kind, tables):
    from seatide.connectors.mysql_cdc.statements import classify

    found = classify(statement, "db")
    assert (found.kind, list(dict.fromkeys(found.tables))) == (kind, tables)


def test_a_captured_table_renamed_away_fails_but_a_swap_in_one_statement_reads_on(private_mariadb,
                                                                                   cdc_database):  # noqa: F811
    """Renamed away, the captured name is gone like a dropped table's (finding 19); swapped in one
    RENAME (pt-online-schema-change's and gh-ost's cut-over), the name holds a table of the same
    rows and the stream reads on."""
    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5424)
    server.execute(f"CREATE TABLE {cdc_database}.orders_new LIKE {table}",
                   f"INSERT INTO {cdc_database}.orders_new SELECT * FROM {table}",
                   f"RENAME TABLE {table} TO {cdc_database}.orders_old, {cdc_database}.orders_new TO {table}",
                   f"INSERT INTO {table} VALUES (3, 'three')")
    assert [r["id"] for r in _read_after(reader, start)] == [3]
    reader, start = _streamed(server, f"{cdc_database}.kept", 5425)
    server.execute(f"RENAME TABLE {cdc_database}.kept TO {cdc_database}.kept_old")
    with pytest.raises(PermanentError) as caught:
        _read_after(reader, start)
    assert f"{cdc_database}.kept was renamed away" in str(caught.value) and "submit it again" in str(caught.value)


def test_a_refused_statement_names_a_table_whatever_its_case_an_alter_only_exactly():
    from seatide.connectors.mysql_cdc.statements import classify

    captured = {("shop", "orders"): None, ("shop", "items"): None}
    assert classify("TRUNCATE Shop.ORDERS", "x").names(captured) == [("shop", "orders")]
    assert classify("DROP DATABASE SHOP", None).names(captured) == [("shop", "orders"), ("shop", "items")]
    assert classify("ALTER TABLE Orders ADD c int", "shop").names(captured) == []
    assert classify("RENAME TABLE orders TO o2, o3 TO ORDERS", "shop").renamed_away(captured) == []
    assert classify("RENAME TABLE orders TO o2", "shop").renamed_away(captured) == [("shop", "orders")]


def test_a_statement_logged_change_of_a_table_whose_trigger_changes_a_captured_one_fails(
        private_mariadb, cdc_database):  # noqa: F811
    """Review 30, F4: a session logging statements writes ``audit``, whose trigger updates the
    captured ``orders``. The binlog holds the outer statement alone (a replica runs the trigger
    again itself): no row of ``orders`` is logged, and the classifier names only ``audit``."""
    server, table = private_mariadb, f"{cdc_database}.orders"
    reader, start = _streamed(server, table, 5423)
    server.execute(f"CREATE TABLE {cdc_database}.audit (id INT PRIMARY KEY)",
                   f"CREATE TRIGGER {cdc_database}.audit_touch AFTER INSERT ON {cdc_database}.audit FOR EACH ROW "
                   f"UPDATE {cdc_database}.orders SET note = 'touched' WHERE id = NEW.id")
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute("INSERT INTO audit VALUES (1)")
        cur.execute("SELECT note FROM orders WHERE id = 1")
        assert cur.fetchone()[0] == "touched"
    with pytest.raises(PermanentError) as caught:
        _read_after(reader, start)
    message = str(caught.value)
    assert table in message and "audit_touch" in message and "binlog_format" in message, message


def test_a_trigger_body_names_a_captured_table_wherever_it_writes_it():
    from seatide.connectors.mysql_cdc.triggers import named_in_body

    captured = {("shop", "orders"): None}
    body = "BEGIN INSERT INTO log VALUES (NEW.id); IF NEW.id > 1 THEN UPDATE `shop`.`Orders` SET a = 1; END IF; END"
    assert named_in_body(body, "other", captured) == [("shop", "orders")]
    assert named_in_body("UPDATE orders SET a = NEW.a", "shop", captured) == [("shop", "orders")]
    assert named_in_body("INSERT INTO log VALUES (NEW.id, 'orders')", "shop", captured) == []
