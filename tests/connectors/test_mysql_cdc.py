"""MySQL-CDC against a private MariaDB with the binlog on: snapshot then changes replicate
exactly (applied by row kind to a replica), a restart from the checkpoint misses nothing,
a purged binlog position fails the resume with a way out, and bad options are refused."""

from __future__ import annotations

import datetime as dt
import secrets
import time
from decimal import Decimal

import pymysql
import pytest
from pyspark.sql import types as T

from seatide.config.loader import ConfigError, load_job_text
from seatide.plugin.base import PERMANENT_MARK, PermanentError, ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind

DEADLINE_S = 60.0

TABLE_DDL = """CREATE TABLE {name} (
  id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2), flag TINYINT(1), small TINYINT UNSIGNED,
  big BIGINT UNSIGNED, score DOUBLE, ts TIMESTAMP(6) NULL, happened DATETIME, day DATE,
  data BLOB, tag ENUM('red','green','blue'), doc JSON, span TIME)"""


def source(server, tables: list[str], extra: str = ""):
    names = ", ".join(f'"{t}"' for t in tables)
    job = load_job_text(
        'env { job.mode = "STREAMING" }\n'
        f'source {{ MySQL-CDC {{ base-url = "{server.url}", username = "root", password = "", '
        f'table-names = [{names}]\n{extra}\n}} }}\nsink {{ Console {{}} }}')
    return job.sources[0].plugin


def reader_of(server, tables: list[str], extra: str, mode: str = "latest", max_rows: int = 1_000_000):
    """The stream reader alone (no Spark), as the source hands it to Spark."""
    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    plugin = source(server, tables, f'startup.mode = "{mode}"\n{extra}')
    found, schema = plugin.discover(plugin.server_config())
    return MySqlCdcReader(stream_options(plugin.server_config(), found, schema.json(), mode, None, max_rows))


def read_range(reader, start: dict, end: dict) -> list[dict]:
    """The rows of the range as the reader's partitions give them, without their ``__row_seq``."""
    return [{k: v for k, v in row.items() if k != ROW_SEQ_COLUMN}
            for part in reader.partitions(start, end) for batch in reader.read(part) for row in batch.to_pylist()]


def stream_ctx(spark, unbounded: bool = True) -> ReadContext:
    return ReadContext(spark, micro_batch=True, unbounded=unbounded, parallelism=2,
                       max_rows_per_batch=100_000, read_interval_ms=200, plugin_id="source[0]")


class Replica:
    """The captured table rebuilt from emitted rows, applied by kind and keyed by id."""

    def __init__(self):
        self.rows: dict[int, dict] = {}
        self.kinds: set[RowKind] = set()

    def apply(self, batch_df, batch_id):
        rows = batch_df.collect()             # one binlog partition: collect keeps binlog order
        seqs = [row[ROW_SEQ_COLUMN] for row in rows]
        assert seqs == sorted(set(seqs)), seqs    # numbered by the source in that order
        for row in rows:
            values = row.asDict()
            values.pop(ROW_SEQ_COLUMN)
            kind = RowKind(values.pop(ROW_KIND_COLUMN))
            self.kinds.add(kind)
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                self.rows[values["id"]] = values
            else:
                self.rows.pop(values["id"], None)


def expected_rows(server, table: str) -> dict[int, dict]:
    """The source table as the connector should present it (TIMESTAMP in UTC, types mapped)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT id, name, amount, flag, small, big, score, ts, happened, day, data, tag, doc, span "
                    f"FROM {table}")
        rows = {}
        for (id_, name, amount, flag, small, big, score, ts, happened, day, data, tag, doc, span) in cur.fetchall():
            rows[id_] = {"id": id_, "name": name, "amount": amount, "flag": None if flag is None else bool(flag),
                         "small": small, "big": None if big is None else Decimal(big), "score": score,
                         "ts": ts, "happened": happened, "day": day,
                         "data": None if data is None else bytearray(data), "tag": tag, "doc": doc,
                         "span": None if span is None else _span(span)}
        return rows


def _span(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def wait_until(condition, what: str, query=None):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the stream failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def start(df, replica: Replica, checkpoint: str):
    return (df.writeStream.trigger(processingTime="200 milliseconds").option("checkpointLocation", checkpoint)
            .foreachBatch(replica.apply).start())


@pytest.fixture
def cdc_database(private_mariadb):
    name = f"mysql_cdc_{secrets.token_hex(4)}"
    private_mariadb.execute(f"CREATE DATABASE {name}")
    yield name
    private_mariadb.execute(f"DROP DATABASE {name}")


def insert(server, table: str, ids) -> None:
    values = []
    for i in ids:
        values.append(f"({i}, 'row {i}', {i}.25, {i % 2}, {200 + i % 50}, {18446744073709551000 + i % 600}, "
                      f"{i} / 3, '2024-03-0{1 + i % 9} 10:00:0{i % 10}.123456', '2024-05-06 07:08:09', "
                      f"'2024-01-{10 + i % 19}', x'00ff{i % 256:02x}', '{('red', 'green', 'blue')[i % 3]}', "
                      f"'{{\"n\": {i}}}', '{i % 24}:30:15')")
    server.execute(f"INSERT INTO {table} VALUES " + ", ".join(values))


@pytest.mark.spark
def test_snapshot_then_changes_replicate_and_restart_misses_nothing(spark, private_mariadb, cdc_database, tmp_path):
    server, table = private_mariadb, f"{cdc_database}.items"
    server.execute(TABLE_DDL.format(name=table))
    insert(server, table, range(1, 41))
    plugin = source(server, [table], "snapshot.split.size = 12\nsnapshot.fetch.size = 5\nserver-id = 5401")
    df = plugin.read(stream_ctx(spark))
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types == {"id": T.IntegerType(), "name": T.StringType(), "amount": T.DecimalType(10, 2),
                     "flag": T.BooleanType(), "small": T.ShortType(), "big": T.DecimalType(20, 0),
                     "score": T.DoubleType(), "ts": T.TimestampNTZType(), "happened": T.TimestampNTZType(),
                     "day": T.DateType(), "data": T.BinaryType(), "tag": T.StringType(),
                     "doc": T.StringType(), "span": T.StringType(), ROW_KIND_COLUMN: T.ByteType(),
                     ROW_SEQ_COLUMN: T.LongType()}
    checkpoint = str(tmp_path / "checkpoint")
    replica = Replica()
    query = start(df, replica, checkpoint)
    try:
        wait_until(lambda: len(replica.rows) == 40, "the snapshot", query)
        # Changes while the stream runs: inserts, updates (also of the key), deletes, NULLs.
        insert(server, table, range(41, 61))
        server.execute(f"UPDATE {table} SET name = CONCAT(name, ' updated'), amount = amount * 2 WHERE id % 3 = 0",
                       f"UPDATE {table} SET id = 1000 WHERE id = 2",
                       f"DELETE FROM {table} WHERE id % 7 = 0",
                       f"UPDATE {table} SET ts = NULL, doc = NULL, data = NULL WHERE id = 5")
        wait_until(lambda: replica.rows == expected_rows(server, table), "the changes", query)
        assert replica.kinds == set(RowKind)
    finally:
        query.stop()
    # Changes while the job is stopped arrive after a restart from the checkpoint.
    server.execute(f"DELETE FROM {table} WHERE id < 10", f"UPDATE {table} SET flag = 1 - flag WHERE id > 30")
    insert(server, table, range(100, 110))
    restarted = start(plugin.read(stream_ctx(spark)), replica, checkpoint)
    try:
        wait_until(lambda: replica.rows == expected_rows(server, table), "the changes made while stopped", restarted)
        insert(server, table, [500])
        wait_until(lambda: 500 in replica.rows, "a change after the restart", restarted)
        assert replica.rows == expected_rows(server, table)
    finally:
        restarted.stop()


@pytest.mark.spark
def test_resume_after_binlog_purge_fails_naming_the_lost_position(spark, private_mariadb, cdc_database, tmp_path):
    server, table = private_mariadb, f"{cdc_database}.purged"
    server.execute(TABLE_DDL.format(name=table))
    plugin = source(server, [table], 'startup.mode = "latest"\nserver-id = 5402')
    checkpoint = str(tmp_path / "checkpoint")
    replica = Replica()
    query = start(plugin.read(stream_ctx(spark)), replica, checkpoint)
    try:
        wait_until(lambda: query.lastProgress is not None, "the first batch", query)
        insert(server, table, [1])
        wait_until(lambda: 1 in replica.rows, "the insert", query)
    finally:
        query.stop()
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        lost_file = cur.fetchone()[0]
        cur.execute("FLUSH BINARY LOGS")
        insert(server, table, [2])          # a change the resumed job would have to read
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        newest = cur.fetchone()[0]

        def purged() -> bool:
            # The stopped query's dump thread on the server ends only once it notices its client gone, and
            # MariaDB quietly keeps a file a dump thread still reads (a CI run met it): no query reads this
            # server now, so such a thread is ended, and the purge taken again until the lost file is gone.
            cur.execute(f"PURGE BINARY LOGS TO '{newest}'")
            cur.execute("SHOW BINARY LOGS")
            if lost_file not in [row[0] for row in cur.fetchall()]:
                return True
            cur.execute("SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'")
            for (thread,) in cur.fetchall():
                try:
                    cur.execute(f"KILL {thread}")
                except pymysql.err.MySQLError:      # it ended meanwhile
                    pass
            return False
        wait_until(purged, "the lost binlog file purged")
    resumed = start(plugin.read(stream_ctx(spark)), replica, checkpoint)
    try:
        with pytest.raises(Exception) as failure:
            resumed.awaitTermination(DEADLINE_S)
            raise AssertionError("the resumed stream kept running over a purged binlog")
    finally:
        resumed.stop()
    message = str(failure.value)
    assert PERMANENT_MARK in message
    assert f"binlog position {lost_file}:" in message
    assert 'startup.mode = "initial"' in message and "submit it again" in message
    assert 2 not in replica.rows


def test_batch_jobs_are_refused(spark):
    plugin = source(type("S", (), {"url": "jdbc:mysql://127.0.0.1:1/test"})(), ["db.t"])
    with pytest.raises(PermanentError, match="STREAMING"):
        plugin.read(stream_ctx(spark, unbounded=False))


@pytest.mark.parametrize("extra, option, fragment", [
    ('base-url = "jdbc:postgresql://h/db"', "base-url", "not a MySQL or MariaDB URL"),
    ('table-names = ["orders"]', "table-names", "database.table"),
    ('database-names = ["other"]', "table-names", "database-names"),
    ('startup.mode = "specific"', "startup.specific-offset.file", "binlog file and position"),
    ('startup.mode = "sometime"', "startup.mode", "initial"),
    ('stop.mode = "latest"', "stop.mode", "not supported"),
    ('server-id = "12-abc"', "server-id", "range (5400-5408)"),
    ('server-id = "9-3"', "server-id", "low to high"),
    ('server-time-zone = "Mars/Olympus"', "server-time-zone", "IANA"),
    ('snapshot.split.size = 0', "snapshot.split.size", "at least 1"),
    ('table-names-config = [{ table = "db.other", primaryKeys = ["id"] }]', "table-names-config", "not in table-names"),
    ('format = "COMPATIBLE_DEBEZIUM_JSON"', "format", "not supported"),
    ('debezium { include.schema.changes = true }\nschema.change.behavior = "ignore"', "schema.change.behavior",
     "contradicts"),
])
def test_option_errors_name_the_option(extra, option, fragment):
    text = ('env { job.mode = "STREAMING" }\n'
            'source { MySQL-CDC { base-url = "jdbc:mysql://127.0.0.1:3306/db", username = "root", '
            f'password = "", table-names = ["db.t"]\n{extra}\n}} }}\nsink {{ Console {{}} }}')
    with pytest.raises(ConfigError) as error:
        load_job_text(text)
    assert error.value.option == option
    assert fragment in str(error.value)


def test_values_from_either_client_convert_to_the_mapped_type():
    from zoneinfo import ZoneInfo

    from seatide.connectors.mysql_cdc.columns import UnsupportedColumn, column

    utc, berlin = ZoneInfo("UTC"), ZoneInfo("Europe/Berlin")

    def col(data_type, column_type, precision=None, scale=None, zone=utc):
        return column("c", data_type, column_type, precision, scale, zone)

    # Unsigned integers logged without column metadata arrive as two's complement.
    assert col("bigint", "bigint(20) unsigned").seatunnel_type == "decimal(20,0)"
    assert col("bigint", "bigint(20) unsigned").convert(-1) == Decimal(2 ** 64 - 1)
    assert (col("tinyint", "tinyint(3) unsigned").seatunnel_type, col("tinyint", "tinyint unsigned").convert(-56)) \
        == ("smallint", 200)
    assert col("int", "int(10) unsigned").seatunnel_type == "bigint"
    # BIT(1) as PyMySQL's bytes or the binlog's string of bits; wider BITs become bytes.
    assert col("bit", "bit(1)").convert("1") is True and col("bit", "bit(1)").convert(b"\x00") is False
    assert col("bit", "bit(12)").convert("000000000101") == b"\x00\x05"
    # ENUM and SET as an index / bit mask when the server logs no metadata.
    assert col("enum", "enum('red','gr''een','blue')").convert(2) == "gr'een"
    assert col("set", "set('a','b','c')").convert(5) == "a,c"
    # TIMESTAMP arrives in UTC and is shown in server-time-zone; DATETIME is left alone.
    noon = dt.datetime(2024, 1, 1, 12, 0)
    assert col("timestamp", "timestamp", zone=berlin).convert(noon) == dt.datetime(2024, 1, 1, 13, 0)
    assert col("datetime", "datetime", zone=berlin).convert(noon) == noon
    assert col("time", "time").convert(dt.timedelta(hours=-838, minutes=-59)) == "-838:59:00"
    assert col("decimal", "decimal(65,2)", 65, 2).seatunnel_type == "string"
    assert col("date", "date").convert("0000-00-00") is None
    with pytest.raises(UnsupportedColumn, match="vector"):
        col("vector", "vector(3)")


def test_binlog_positions_order_by_file_sequence_then_position():
    from seatide.connectors.mysql_cdc.position import BINLOG, BinlogPosition, StreamOffset

    assert BinlogPosition.of("binlog.000010", 4) > BinlogPosition.of("binlog.000009", 99_999)
    offset = StreamOffset.at(BinlogPosition.of("binlog.000002", 1234))
    assert StreamOffset.from_json(offset.to_json()) == offset and offset.phase == BINLOG


def test_specific_and_earliest_starts_read_sharded_tables_and_replay_identically(private_mariadb, cdc_database):
    """The reader's own calls, without Spark: offsets, partitions and rows of one binlog range."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.connectors.mysql_cdc.position import BinlogPosition
    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    server = private_mariadb
    shards = [f"{cdc_database}.shard1", f"{cdc_database}.shard2"]
    for shard in shards:
        server.execute(TABLE_DDL.format(name=shard))
    insert(server, shards[0], [1])                          # before the start position
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    insert(server, shards[0], [2])
    insert(server, shards[1], [3])
    server.execute(f"UPDATE {shards[1]} SET name = 'three' WHERE id = 3", f"DELETE FROM {shards[0]} WHERE id = 1")

    def changes(mode_options: str) -> tuple[MySqlCdcReader, dict, dict, list]:
        plugin = source(server, shards, mode_options + "\nserver-id = 5403")
        tables, schema = plugin.discover(plugin.server_config())
        specific = (plugin.opts["startup.specific-offset.file"], plugin.opts["startup.specific-offset.pos"])
        reader = MySqlCdcReader(stream_options(plugin.server_config(), tables, schema.json(), plugin.opts["startup.mode"],
                                               BinlogPosition.of(*specific) if specific[0] else None))
        start = end = reader.initialOffset()
        rows = []
        while (later := reader.latestOffset(end, ReadAllAvailable())) != end:   # a DDL starts a batch
            rows, end = rows + read_all(reader, end, later), later
        return reader, start, end, rows

    def read_all(reader, start, end) -> list:
        return [(row["id"], row["name"], RowKind(row[ROW_KIND_COLUMN]))
                for part in reader.partitions(start, end) for batch in reader.read(part)
                for row in batch.to_pylist()]

    reader, start, end, rows = changes(f'startup.mode = "specific"\nstartup.specific-offset.file = "{file}"\n'
                                       f"startup.specific-offset.pos = {pos}")
    # each table's changes in binlog order (a batch holds one table's rows: plugin.tables)
    assert rows == [(2, "row 2", RowKind.INSERT), (1, "row 1", RowKind.DELETE), (3, "row 3", RowKind.INSERT),
                    (3, "row 3", RowKind.UPDATE_BEFORE), (3, "three", RowKind.UPDATE_AFTER)]
    assert read_all(reader, start, end) == rows             # a replayed batch yields the same rows
    assert reader.latestOffset(end, ReadAllAvailable()) == end    # nothing new: no batch
    _, _, _, everything = changes('startup.mode = "earliest"')
    assert everything[0] == (1, "row 1", RowKind.INSERT) and everything[1:] == rows


EVERY_TYPE_DDL = """CREATE TABLE {name} (
  id INT PRIMARY KEY, c_tiny TINYINT, c_utiny TINYINT UNSIGNED, c_small SMALLINT, c_usmall SMALLINT UNSIGNED,
  c_medium MEDIUMINT, c_umedium MEDIUMINT UNSIGNED, c_int INT, c_uint INT UNSIGNED, c_big BIGINT,
  c_ubig BIGINT UNSIGNED, c_bool TINYINT(1), c_bit1 BIT(1), c_bit12 BIT(12), c_year YEAR,
  c_dec DECIMAL(10,2), c_udec DECIMAL(12,4) UNSIGNED, c_wide DECIMAL(65,5), c_float FLOAT, c_double DOUBLE,
  c_char CHAR(5), c_varchar VARCHAR(40), c_tinytext TINYTEXT, c_text TEXT, c_mediumtext MEDIUMTEXT,
  c_longtext LONGTEXT, c_latin VARCHAR(20) CHARACTER SET latin1, c_json JSON,
  c_enum ENUM('red','green','blue'), c_set SET('a','b','c','d'),
  c_date DATE, c_time TIME(3), c_datetime DATETIME(6), c_ts TIMESTAMP(6) NULL,
  c_binary BINARY(4), c_varbinary VARBINARY(10), c_tinyblob TINYBLOB, c_blob BLOB, c_mediumblob MEDIUMBLOB,
  c_longblob LONGBLOB, c_geometry GEOMETRY) DEFAULT CHARSET = utf8mb4"""

EVERY_TYPE_ROW = ("{id}, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
                  "-9223372036854775808, 18446744073709551615, 1, b'1', b'101010101010', 2155, "
                  "-12345678.91, 12345678.1234, 123456789012345678901234567890123456789012345678901234567890.12345, "
                  "1.5, -2.25, 'ab', 'varchar ✓', 'tiny', 'text 😀', 'medium', 'long', 'café', "
                  "'{{\"k\": [1, \"x\"]}}', 'blue', 'a,c', '2024-02-29', '-838:59:58.5', "
                  "'2024-01-02 03:04:05.678901', '2024-06-07 08:09:10.123456', x'00ff0102', x'c3', "
                  "x'ff00', x'80818283', x'fffefd00c328', x'deadbeef', ST_GeomFromText('POINT(1 2)')")


@pytest.mark.parametrize("metadata", ["NO_LOG", "MINIMAL", "FULL"])
def test_every_type_reads_alike_in_snapshot_and_binlog_whatever_the_row_metadata(private_mariadb, cdc_database,
                                                                                 metadata):
    """binlog_row_metadata = MINIMAL is MySQL 8's default and NO_LOG MariaDB's: without FULL the
    binlog decoder knows neither names, charsets nor ENUM/SET values. Binary columns must stay
    bytes (not a UnicodeDecodeError), ENUM and SET their values (finding 6 of issue 22, item 4
    of issue 23)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server, table = private_mariadb, f"{cdc_database}.every_type"
    server.execute(EVERY_TYPE_DDL.format(name=table), f"INSERT INTO {table} VALUES ({EVERY_TYPE_ROW.format(id=1)})")
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.binlog_row_metadata")
        before = cur.fetchone()[0]
    server.execute(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
    try:
        reader = reader_of(server, [table], "server-id = 5404", "initial")

        def rows(start, end):
            return read_range(reader, start, end)

        snapshot_end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        (snapshot,) = rows(reader.initialOffset(), snapshot_end)
        server.execute(f"INSERT INTO {table} VALUES ({EVERY_TYPE_ROW.format(id=2)})",
                       f"UPDATE {table} SET c_enum = 'green', c_set = 'b,d', c_mediumblob = x'00fe' WHERE id = 1")
        end = reader.latestOffset(snapshot_end, ReadAllAvailable())
        inserted, before_update, after_update = rows(snapshot_end, end)
    finally:
        server.execute(f"SET GLOBAL binlog_row_metadata = '{before}'")
    assert snapshot["c_mediumblob"] == b"\xff\xfe\xfd\x00\xc3\x28" and snapshot["c_enum"] == "blue"
    assert snapshot["c_set"] == "a,c" and snapshot["c_text"] == "text 😀" and snapshot["c_latin"] == "café"
    assert {**inserted, "id": 1} == snapshot
    assert {**before_update, ROW_KIND_COLUMN: RowKind.INSERT} == snapshot
    assert after_update == {**snapshot, "c_enum": "green", "c_set": "b,d", "c_mediumblob": b"\x00\xfe",
                            ROW_KIND_COLUMN: RowKind.UPDATE_AFTER}


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_columns_a_session_leaves_out_of_the_row_image_are_read_by_key_not_nulled(private_mariadb, cdc_database,
                                                                                  image):
    """A session may log binlog_row_image = MINIMAL or NOBLOB whatever the server's default:
    an UPDATE then logs only the columns it set. The change row must carry the others, not
    nulls an upsert would write over the target (finding 9 of issue 22)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server, table = private_mariadb, f"{cdc_database}.imaged"
    server.execute(TABLE_DDL.format(name=table))
    reader = reader_of(server, [table], "server-id = 5405")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SET SESSION binlog_row_image = '{image}'")
        insert(type("S", (), {"execute": lambda self, *s: [cur.execute(x) for x in s]})(), table, [1, 2])
        cur.execute(f"UPDATE {table} SET name = 'renamed' WHERE id = 1")
        cur.execute(f"UPDATE {table} SET id = 20 WHERE id = 2")
    end = reader.latestOffset(start, ReadAllAvailable())
    rows = read_range(reader, start, end)
    expected = expected_rows(server, table)
    after = {r["id"]: {k: v for k, v in r.items() if k != ROW_KIND_COLUMN}
             for r in rows if r[ROW_KIND_COLUMN] == RowKind.UPDATE_AFTER}
    assert after == expected and set(after) == {1, 20}


def test_a_schema_change_that_keeps_the_column_count_fails_instead_of_shifting_values(private_mariadb, cdc_database):
    """Dropping one column and adding another keeps the count: matched by position, values land
    in the wrong columns (finding 11 of issue 22). The ALTER TABLE statement in the binlog stops a
    reader that does not follow changes, naming it (behind it, the table map's types and names are
    compared with the columns the job reads)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable


    server, table = private_mariadb, f"{cdc_database}.reshaped"
    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2))")
    reader = reader_of(server, [table], "server-id = 5406")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    server.execute(f"ALTER TABLE {table} DROP COLUMN name, ADD COLUMN note VARCHAR(40) AFTER amount",
                   f"INSERT INTO {table} VALUES (1, 2.5, 'a note')")
    with pytest.raises(PermanentError) as caught:
        for _ in range(3):          # the batch before the DDL, then the one that starts with it
            end = reader.latestOffset(start, ReadAllAvailable())
            read_range(reader, start, end)
            start = end
    message = str(caught.value)
    assert message.startswith(PERMANENT_MARK) and f"{table}" in message and "DROP COLUMN name" in message


EVOLVING = ReadContext(None, micro_batch=True, unbounded=True, parallelism=1, max_rows_per_batch=1000,
                       read_interval_ms=200, plugin_id="source[0]")


def evolving_reader(plugin, table: str, ctx: ReadContext = EVOLVING):
    """The stream reader as the source hands it to Spark when the query starts with ``ctx`` (the
    shapes kept with the checkpoint, the change the query stopped at), and the shape it reads
    ``table`` with."""
    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    plugin._ctx = ctx
    found, schema = plugin.discover(plugin.server_config())
    options = stream_options(plugin.server_config(), found, schema.json(), "latest", None, 1000, None, "evolve")
    return MySqlCdcReader(options), plugin.table_shapes()[table]


def started_again(plugin, table: str, shape, stopped: Exception):
    """The reader of the query started again after ``stopped`` (a SchemaChanged), with that change applied."""
    from dataclasses import replace

    from seatide.plugin.evolution import schema_change_in

    seen = schema_change_in(str(stopped))
    return evolving_reader(plugin, table, replace(EVOLVING, known_tables={table: shape.json()},
                                                  seen={seen["table"]: seen["seen"]}))


def test_each_alter_table_stops_the_query_at_its_place_and_the_rows_after_it_read_with_its_shape(
        private_mariadb, cdc_database):
    """Two statements already in the binlog when the stream meets the first (issue 24): each stops
    the query once, where the batch that starts with it is planned, the source applies that one to
    the shape kept (a rename keeps the column's id), and the stream then reads on with it; the
    server, already past both, is not the shape."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.plugin.evolution import COLUMN_ID, SchemaChanged, live_fields

    server, table = private_mariadb, f"{cdc_database}.altered"
    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(9), qty INT)")
    plugin = source(server, [table], 'startup.mode = "latest"\nserver-id = 5408\nschema.change.behavior = "evolve"')
    reader, shape = evolving_reader(plugin, table)
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    server.execute(f"ALTER TABLE {table} RENAME COLUMN qty TO quantity, ADD note TEXT AFTER name",
                   f"INSERT INTO {table} VALUES (1, 'a', 'x', 5)", f"ALTER TABLE {table} DROP COLUMN name",
                   f"INSERT INTO {table} VALUES (2, 'y', 6)")
    read = []
    for _ in range(2):
        with pytest.raises(SchemaChanged) as stopped:
            reader.latestOffset(start, ReadAllAvailable())
        reader, shape = started_again(plugin, table, shape, stopped.value)
        end = reader.latestOffset(start, ReadAllAvailable())
        live = [f.name for f in live_fields(shape)]
        read.append((live, [{k: r[k] for k in live} for r in read_range(reader, start, end)]))
        start = end
    assert read == [(["id", "name", "note", "quantity"], [{"id": 1, "name": "a", "note": "x", "quantity": 5}]),
                    (["id", "note", "quantity"], [{"id": 2, "note": "y", "quantity": 6}])]
    assert {f.name: f.metadata[COLUMN_ID] for f in live_fields(shape)} == {"id": 1, "note": 4, "quantity": 3}


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
@pytest.mark.parametrize("ddl", ["DROP COLUMN name", "RENAME COLUMN name TO title"])
def test_a_partial_row_image_after_a_drop_or_rename_is_completed_from_the_columns_the_table_has_now(
        private_mariadb, cdc_database, image, ddl):
    """A MINIMAL or NOBLOB update after a column was dropped or renamed: the shape the stream reads
    keeps the old column (retired) for rows from before the change, but the table no longer has
    it, so the row's missing columns are read by key from the live columns alone (finding 14 of
    issue 30: selecting the retired one failed the batch on every replay)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.plugin.evolution import SchemaChanged, live_fields

    server, table = private_mariadb, f"{cdc_database}.partial"
    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(9), qty INT, note TEXT)",
                   f"INSERT INTO {table} VALUES (1, 'a', 5, 'kept')")
    plugin = source(server, [table], 'startup.mode = "latest"\nserver-id = 5412\nschema.change.behavior = "evolve"')
    reader, shape = evolving_reader(plugin, table)
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {table} {ddl}")
        cur.execute(f"SET SESSION binlog_row_image = '{image}'")
        cur.execute(f"UPDATE {table} SET qty = 6 WHERE id = 1")
    with pytest.raises(SchemaChanged) as stopped:
        reader.latestOffset(start, ReadAllAvailable())
    reader, shape = started_again(plugin, table, shape, stopped.value)
    end = reader.latestOffset(start, ReadAllAvailable())
    live = [f.name for f in live_fields(shape)]
    after = [{k: r[k] for k in live} for r in read_range(reader, start, end) if r[ROW_KIND_COLUMN] == RowKind.UPDATE_AFTER]
    expected = {"id": 1, "qty": 6, "note": "kept", **({"title": "a"} if "RENAME" in ddl else {})}
    assert after == [expected]


@pytest.mark.parametrize("lands", ["after planning", "while planning"])
def test_a_ddl_landing_as_a_batch_is_planned_is_taken_between_batches_not_in_one(
        private_mariadb, cdc_database, monkeypatch, lands):
    """An ALTER TABLE written just after the driver planned a batch's end, or while it plans it (after
    it asked where the binlog ends, before it walked there), is the next batch's first transaction.
    Its change is taken between batches: planning the next batch stops the query with it
    (SchemaChanged on the driver), the query starts again with the statement applied, and no planned
    batch's read meets a change it does not hold (a stop inside a batch's task is what failed under
    load). Every row comes once, in order, each with the columns it was written with."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.connectors.mysql_cdc import stream
    from seatide.plugin.evolution import SchemaChanged, live_fields

    server, table = private_mariadb, f"{cdc_database}.landed"
    server.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(9))")
    plugin = source(server, [table], 'startup.mode = "latest"\nserver-id = 5410\nschema.change.behavior = "evolve"')
    reader, shape = evolving_reader(plugin, table)
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    server.execute(f"INSERT INTO {table} VALUES (1, 'a')")
    change = [f"ALTER TABLE {table} ADD COLUMN note TEXT", f"INSERT INTO {table} VALUES (2, 'b', 'x')"]
    if lands == "while planning":
        walk = stream.batch_end

        def landing(*args, **kwargs):
            server.execute(*change)
            return walk(*args, **kwargs)

        monkeypatch.setattr(stream, "batch_end", landing)
    end = reader.latestOffset(start, ReadAllAvailable())            # batch 1 planned: its end is fixed
    monkeypatch.undo()
    if lands == "after planning":
        server.execute(*change)
    read = [{k: r[k] for k in ("id", "name")} for r in read_range(reader, start, end)]
    start = end
    with pytest.raises(SchemaChanged) as stopped:                    # planning batch 2 meets the statement
        reader.latestOffset(start, ReadAllAvailable())
    reader, shape = started_again(plugin, table, shape, stopped.value)
    assert [f.name for f in live_fields(shape)] == ["id", "name", "note"]
    end = reader.latestOffset(start, ReadAllAvailable())
    read += [{k: r[k] for k in ("id", "name", "note")} for r in read_range(reader, start, end)]
    assert read == [{"id": 1, "name": "a"}, {"id": 2, "name": "b", "note": "x"}]
    assert reader.latestOffset(end, ReadAllAvailable()) == end       # nothing left over, nothing read twice


def test_a_truncate_fails_the_stream_loudly_instead_of_being_skipped(private_mariadb, cdc_database):
    """TRUNCATE is logged as a statement, not as row deletes: skipped, the target would keep
    every row (finding 8 of issue 22)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable


    server, table = private_mariadb, f"{cdc_database}.emptied"
    server.execute(TABLE_DDL.format(name=table))
    reader = reader_of(server, [table], "server-id = 5407")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    insert(server, table, [1])
    with server.connect(database=cdc_database) as conn, conn.cursor() as cur:
        cur.execute("TRUNCATE emptied")
    with pytest.raises(PermanentError) as caught:
        for _ in range(3):      # the batch of the rows before it, then the one it starts (batch_end.py)
            end = reader.latestOffset(start, ReadAllAvailable())
            read_range(reader, start, end)
            start = end
    assert f"{table} was truncated" in str(caught.value) and "submit it again" in str(caught.value)


def test_an_offset_of_another_server_fails_the_resume_instead_of_reading_its_file(private_mariadb, cdc_database):
    """After a failover the same binlog file name holds other changes: offsets carry the server's
    identity and a resume against another server fails naming both (finding 13 of issue 22)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server, table = private_mariadb, f"{cdc_database}.moved"
    server.execute(TABLE_DDL.format(name=table))

    def reader():
        return reader_of(server, [table], "server-id = 5408")

    first = reader().latestOffset(reader().initialOffset(), ReadAllAvailable())
    assert first["server"]
    insert(server, table, [1])
    assert reader().latestOffset(first, ReadAllAvailable())["server"] == first["server"]   # same server: resumes
    # without a GTID position (an offset from before, or MySQL without gtid_mode); with one, the
    # stream moves to its place on the new server (test_mysql_cdc_failover.py)
    elsewhere = {**{k: v for k, v in first.items() if k != "gtid"}, "server": "another-server"}
    with pytest.raises(PermanentError) as caught:
        reader().latestOffset(elsewhere, ReadAllAvailable())
    message = str(caught.value)
    assert message.startswith(PERMANENT_MARK) and "another-server" in message and first["server"] in message
    assert "submit it again" in message


def test_snapshot_and_backlog_are_cut_into_bounded_batches_at_transaction_boundaries(private_mariadb, cdc_database):
    """micro-batch.max-rows bounds MySQL-CDC batches: the snapshot is read a few splits per batch,
    and a binlog backlog ends each batch at a commit once it may hold max_rows rows, instead of
    one batch of everything (finding 12 of issue 22)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable


    server, table = private_mariadb, f"{cdc_database}.bounded"
    server.execute(TABLE_DDL.format(name=table))
    insert(server, table, range(1, 101))
    reader = reader_of(server, [table], "snapshot.split.size = 10\nserver-id = 5409", "initial", 30)

    def batches(start) -> tuple[list[list], dict]:
        out = []
        while True:
            end = reader.latestOffset(start, ReadAllAvailable())
            if end == start:
                return out, start
            out.append([(r["id"], RowKind(r[ROW_KIND_COLUMN])) for part in reader.partitions(start, end)
                        for batch in reader.read(part) for r in batch.to_pylist()])
            start = end

    snapshot, at = batches(reader.initialOffset())
    assert sorted(i for rows in snapshot for i, _ in rows) == list(range(1, 101))
    assert len(snapshot) >= 4 and max(len(rows) for rows in snapshot) <= 30
    for first in range(200, 400, 20):                 # a backlog: 10 transactions of 20 rows
        insert(server, table, range(first, first + 20))
    backlog, _ = batches(at)
    assert [i for rows in backlog for i, _ in rows] == list(range(200, 400))
    assert len(backlog) >= 4 and max(len(rows) for rows in backlog) <= 30 + 20


def test_the_snapshot_position_comes_from_a_consistent_snapshot(private_mariadb, cdc_database):
    """MariaDB names the binlog position of a consistent snapshot: what it returns is where the
    binlog stands for reads from then on (finding 10 of issue 22, MySQL side)."""
    from seatide.connectors.mysql_cdc.catalog import current_position, snapshot_position

    private_mariadb.execute(f"CREATE TABLE {cdc_database}.t (id int PRIMARY KEY)",
                            f"INSERT INTO {cdc_database}.t VALUES (1)")
    with private_mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_position'")
        assert cur.fetchone() is not None                    # the server offers it
        assert snapshot_position(conn) == current_position(conn)


@pytest.mark.spark
def test_tables_of_different_shapes_stream_through_one_binlog_reader_tagged_by_table(spark, private_mariadb,
                                                                                     cdc_database, tmp_path):
    """Several tables, each of its own columns, read by ONE binlog reader: each row carries its
    table (plugin.tables), and each table read back out of the stream equals its source."""
    server, items, notes = private_mariadb, f"{cdc_database}.items", f"{cdc_database}.notes"
    server.execute(TABLE_DDL.format(name=items), f"CREATE TABLE {notes} (id INT PRIMARY KEY, body TEXT, at DATE)")
    insert(server, items, range(1, 21))
    server.execute(f"INSERT INTO {notes} VALUES (1, 'one', '2024-01-01'), (2, 'two', '2024-01-02')")
    plugin = source(private_mariadb, [f"{items},{notes}"], "server-id = 5411\nsnapshot.split.size = 7")
    assert plugin.multi_table() and [t.table for t in plugin.tables()] == [items, notes]
    df = plugin.read(stream_ctx(spark))
    layout = plugin.table_layout(None)
    replicas = {0: Replica(), 1: Replica()}

    def apply(batch_df, batch_id):
        for index, replica in replicas.items():
            replica.apply(layout.table_frame(batch_df, index), batch_id)

    query = (df.writeStream.trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "cp")).foreachBatch(apply).start())
    try:
        wait_until(lambda: len(replicas[0].rows) == 20 and len(replicas[1].rows) == 2, "both snapshots", query)
        insert(server, items, [50])
        server.execute(f"UPDATE {notes} SET body = 'edited' WHERE id = 1", f"DELETE FROM {items} WHERE id < 5",
                       f"INSERT INTO {notes} VALUES (3, 'three', NULL)")
        expected_notes = {1: {"id": 1, "body": "edited", "at": dt.date(2024, 1, 1)},
                          2: {"id": 2, "body": "two", "at": dt.date(2024, 1, 2)}, 3: {"id": 3, "body": "three", "at": None}}
        wait_until(lambda: replicas[0].rows == expected_rows(server, items) and replicas[1].rows == expected_notes,
                   "the changes of both tables", query)
    finally:
        query.stop()
