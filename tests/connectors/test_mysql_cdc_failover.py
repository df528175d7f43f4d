"""MySQL-CDC across a failover (issue 22 finding 13): offsets keep the GTID position of their
binlog position, and a stream resumed against a promoted replica, whose binlog files and byte
positions differ, goes on from the first transaction the offset did not hold: every change
once, none lost. Without the GTID position there, the resume fails naming the way out."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time

import pytest

from seatide.connectors.mysql_cdc import gtid
from seatide.plugin.base import PERMANENT_MARK, PermanentError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from seatide.testing.servers import start_private_mariadb, stop_private_mariadb

DEADLINE_S = 30.0


def _one(server, query: str):
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(query)
        return cur.fetchone()[0]


@pytest.fixture
def replica(private_mariadb):
    """A second private MariaDB (server_id 2, logging what it replicates) replicating the session's
    one by GTID from its current position on."""
    workdir = tempfile.mkdtemp(prefix="seatide-mysql-replica-")
    process = None
    try:
        server, process = start_private_mariadb(workdir, server_id=2, extra_args=("--log-slave-updates",))
        server.execute("RESET MASTER",
                       f"SET GLOBAL gtid_slave_pos = '{_one(private_mariadb, 'SELECT @@gtid_binlog_pos')}'",
                       f"CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {private_mariadb.port}, "
                       "MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos",
                       "START SLAVE")
        yield server
    finally:
        if process is not None:
            stop_private_mariadb(process)
        shutil.rmtree(workdir, ignore_errors=True)


def caught_up(primary, replica) -> None:
    want = _one(primary, "SELECT @@gtid_binlog_pos")
    deadline = time.monotonic() + DEADLINE_S
    while _one(replica, "SELECT @@gtid_slave_pos") != want:
        with replica.connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            names = [d[0] for d in cur.description]
            status = dict(zip(names, cur.fetchone() or ()))
        if status.get("Last_Error") or status.get("Last_IO_Error"):
            raise AssertionError(f"replication failed: {status.get('Last_Error') or status.get('Last_IO_Error')}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the replica did not reach {want}")
        time.sleep(0.05)


def changes(reader, start: dict, end: dict) -> list[tuple]:
    return [(RowKind(r[ROW_KIND_COLUMN]), r["id"], r["v"]) for part in reader.partitions(start, end)
            for batch in reader.read(part) for r in batch.to_pylist()]


def test_a_stream_resumed_against_a_promoted_replica_goes_on_from_its_gtid_position(private_mariadb, replica):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from tests.connectors.test_mysql_cdc import reader_of

    primary, database = private_mariadb, f"mysql_cdc_failover_{secrets.token_hex(4)}"
    table = f"{database}.moved"
    primary.execute(f"CREATE DATABASE {database}", f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
    try:
        before = reader_of(primary, [table], "server-id = 5411")
        o0 = before.latestOffset(before.initialOffset(), ReadAllAvailable())
        primary.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        o1 = before.latestOffset(o0, ReadAllAvailable())
        assert changes(before, o0, o1) == [(RowKind.INSERT, 1, "a"), (RowKind.INSERT, 2, "b"), (RowKind.INSERT, 3, "c")]
        assert o1["gtid"] == ["mariadb", _one(primary, "SELECT @@gtid_binlog_pos")]
        # a batch planned on the primary and never read: the failover comes first
        primary.execute(f"INSERT INTO {table} VALUES (4, 'd')", f"UPDATE {table} SET v = 'B' WHERE id = 2",
                        f"DELETE FROM {table} WHERE id = 3")
        o2 = before.latestOffset(o1, ReadAllAvailable())
        second = [(RowKind.INSERT, 4, "d"), (RowKind.UPDATE_BEFORE, 2, "b"), (RowKind.UPDATE_AFTER, 2, "B"),
                  (RowKind.DELETE, 3, "c")]
        before.stop()
        caught_up(primary, replica)
        replica.execute("STOP SLAVE")                     # promoted: base-url now reaches it

        after = reader_of(replica, [table], "server-id = 5411")
        assert changes(after, o1, o2) == second           # the same transactions, found by GTID
        replica.execute(f"INSERT INTO {table} VALUES (5, 'e')")
        o3 = after.latestOffset(o2, ReadAllAvailable())
        assert o3["server"] != o2["server"] and o3["gtid"][0] == "mariadb"
        assert changes(after, o2, o3) == [(RowKind.INSERT, 5, "e")]
        assert o3["gtid"][1] == _one(replica, "SELECT @@gtid_binlog_pos")

        # a fresh resume from the offset of the last batch read on the primary
        fresh = reader_of(replica, [table], "server-id = 5411")
        o2b = fresh.latestOffset(o1, ReadAllAvailable())
        assert changes(fresh, o1, o2b) == [*second, (RowKind.INSERT, 5, "e")]

        # a GTID position the replica's binlog does not reach: refused with the way out
        unknown = {**o1, "gtid": ["mariadb", "0-1-999999"]}
        with pytest.raises(PermanentError) as caught:
            reader_of(replica, [table], "server-id = 5411").latestOffset(unknown, ReadAllAvailable())
        message = str(caught.value)
        assert message.startswith(PERMANENT_MARK) and "0-1-999999" in message and "submit it again" in message
        # an offset without a GTID position keeps the refusal
        bare = {k: v for k, v in o1.items() if k != "gtid"}
        with pytest.raises(PermanentError) as caught:
            reader_of(replica, [table], "server-id = 5411").latestOffset(bare, ReadAllAvailable())
        assert "no GTID position" in str(caught.value)
        after.stop()
        fresh.stop()
    finally:
        primary.execute(f"DROP DATABASE IF EXISTS {database}")


def test_gtid_positions_of_both_kinds_hold_what_they_name():
    """MariaDB's per-domain positions and MySQL's sets (the MySQL path has no server here)."""
    assert gtid.includes("mariadb", "0-1-5,1-2-3", "0-2-5") and not gtid.includes("mariadb", "0-1-5", "0-1-6")
    assert not gtid.includes("mariadb", "0-1-5", "1-1-1")
    assert gtid.contains("mariadb", "0-1-5,1-2-3", "0-1-4") and not gtid.contains("mariadb", "0-1-5", "0-1-5,1-1-1")
    assert gtid.advance("mariadb", "0-1-5", ["0-1-6", "1-3-1", "0-2-7"]) == "0-2-7,1-3-1"
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    state = f"{uuid.upper()}:1-5:7,\n{uuid[:-1]}0:1-3"
    assert gtid.includes("mysql", state, f"{uuid}:4") and not gtid.includes("mysql", state, f"{uuid}:6")
    assert gtid.advance("mysql", state, [f"{uuid}:6"]) == f"{uuid[:-1]}0:1-3,{uuid}:1-7"
    assert gtid.contains("mysql", state, f"{uuid}:2-4") and not gtid.contains("mysql", state, f"{uuid}:5-6")
    assert gtid.event_gtid("mysql", f"SET @@SESSION.GTID_NEXT= '{uuid}:8'") == f"{uuid}:8"
    assert gtid.event_gtid("mariadb", "BEGIN GTID 0-1-8") == "0-1-8"
    assert gtid.event_gtid("mariadb", "GTID 2-1-9 cid=12") == "2-1-9"
