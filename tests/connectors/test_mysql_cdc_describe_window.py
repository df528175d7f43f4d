"""MySQL-CDC between the description of the tables and the first batch's binlog position.

A query describes its tables when it starts; the binlog is read from no later than there
(stream.py ``_snapshot_start``). A statement logged while a table is being described, or
between its description and the first batch, must be applied exactly once: passed over when
the description (or the snapshot read after it) already holds it, applied when it does not.
Each test holds the description at a failpoint (``mysql_cdc.describe_table`` before a table is
described, ``mysql_cdc.table_described`` after, its metadata still locked) and changes the
table there, or between the description and the first batch."""

from __future__ import annotations

import threading
import time

import pytest

from tests.connectors.cdc_mysql_server import private_mariadb  # noqa: F401  (a fixture)
from tests.connectors.test_mysql_cdc import DEADLINE_S, cdc_database, read_range, source  # noqa: F401

from seatide import failpoints
from seatide.plugin.evolution import schema_change_in
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def described_holding(monkeypatch, tmp_path, plugin, point: str, during, passes: int = 0):
    """``plugin.discover`` held at failpoint ``point`` (after ``passes`` tables) while ``during()``
    runs: (tables, schema)."""
    gate = tmp_path / f"{point}.go"
    monkeypatch.setitem(failpoints._POINTS, point, f"gate:{passes}:{gate}")
    monkeypatch.setitem(failpoints._HITS, point, 0)
    found: list = []
    describing = threading.Thread(target=lambda: found.append(plugin.discover(plugin.server_config())))
    describing.start()
    try:
        wait_for(lambda: failpoints._HITS.get(point, 0) > passes, f"the description to reach {point}")
        during()
    finally:
        gate.touch()
        describing.join(DEADLINE_S)
    assert found, "the description failed (see the thread's traceback)"
    return found[0]


def stream(plugin, described, between=None, batches: int = 6):
    """The stream read batch by batch (``between()`` after the first, the snapshot's): (rows, where
    it stopped and why; None: it read on)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    found, schema = described
    layout = plugin.table_layout(None) if plugin.multi_table() else None
    reader = MySqlCdcReader(stream_options(plugin.server_config(), found, schema.json(), "initial", None, 1000, layout,
                                           "evolve"))
    rows, start = [], reader.initialOffset()
    for batch in range(batches):
        try:
            end = reader.latestOffset(start, ReadAllAvailable())
            rows += read_range(reader, start, end)
        except Exception as exc:  # noqa: BLE001 - where the stream stops, and why, is the finding
            return rows, schema_change_in(str(exc)) or str(exc)
        if batch == 0 and between is not None:
            between()
        start = end
    return rows, None


def applied(rows: list[dict]) -> dict:
    """The table rebuilt from the stream's rows, by key."""
    table: dict = {}
    for row in rows:
        values = {k: v for k, v in row.items() if k != ROW_KIND_COLUMN}
        if RowKind(row[ROW_KIND_COLUMN]) in (RowKind.INSERT, RowKind.UPDATE_AFTER):
            table[values["id"]] = values
        else:
            table.pop(values["id"], None)
    return table


def test_an_alter_logged_while_the_table_is_described_is_not_applied_twice(monkeypatch, tmp_path,
                                                                           private_mariadb, cdc_database):
    """H2: the ALTER is logged after the query starts and before its table is described: the
    description holds its column, and the binlog, read from where the query started, holds the
    statement. Applied again it adds a column the shape has already: the first snapshot failed
    for good. Passed over, the stream reads on with the column."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = described_holding(monkeypatch, tmp_path, plugin, "mysql_cdc.describe_table", lambda: private_mariadb
                                  .execute(f"ALTER TABLE {table} ADD COLUMN c1 INT NOT NULL DEFAULT 7"))
    assert [c[0] for c in described[0][0].described] == ["id", "name", "c1"]
    rows, stopped = stream(plugin, described, lambda: private_mariadb.execute(
        f"INSERT INTO {table} (id, name, c1) VALUES (2, 'b', 5)"))
    assert stopped is None, stopped
    assert applied(rows) == {1: {"id": 1, "name": "a", "c1": 7}, 2: {"id": 2, "name": "b", "c1": 5}}


def test_an_alter_waiting_on_the_described_table_is_applied_after_it(monkeypatch, tmp_path,
                                                                     private_mariadb, cdc_database):
    """The other side of H2: an ALTER sent once the table is described, before the description's
    binlog position is taken, is not in the description: it must be read from the binlog and
    applied (the stream stops at it), never passed over as if the description held it. The
    table's metadata lock, held from before the description to after the position, keeps it
    waiting until then."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))",
                            f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    altering = threading.Thread(target=lambda: private_mariadb.execute(
        f"ALTER TABLE {table} ADD COLUMN c1 INT NOT NULL DEFAULT 7"))

    def alter_waiting_or_done():
        with private_mariadb.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'ALTER TABLE%%' "
                        "AND STATE LIKE '%%metadata lock%%'")
            return cur.fetchone()[0] > 0 or not altering.is_alive()

    def alter():
        altering.start()
        wait_for(alter_waiting_or_done, "the ALTER to wait on the table or be done")

    described = described_holding(monkeypatch, tmp_path, plugin, "mysql_cdc.table_described", alter)
    altering.join(DEADLINE_S)
    assert [c[0] for c in described[0][0].described] == ["id", "name"]
    rows, stopped = stream(plugin, described)
    assert isinstance(stopped, dict) and "ADD COLUMN c1" in stopped["seen"]["ddl"], stopped


def test_a_table_altered_while_the_one_before_it_is_described_is_read_after_its_own_description(
        monkeypatch, tmp_path, private_mariadb, cdc_database):
    """Two tables, described one after the other: the stream starts where the first was described.
    A row of the second written before its ALTER, both between the two descriptions, is in the
    second's snapshot; read again from the binlog, it has the layout before the ALTER, which the
    description holds: read by name (binlog_row_metadata = FULL) it lacked the column and put null
    over the 7 the snapshot read, a value the row never had."""
    first, second = f"{cdc_database}.a", f"{cdc_database}.b"
    private_mariadb.execute(*[f"CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20))" for t in (first, second)])
    plugin = source(private_mariadb, [first, second], "schema-changes.enabled = true")
    described = described_holding(monkeypatch, tmp_path, plugin, "mysql_cdc.describe_table", lambda: private_mariadb
                                  .execute(f"INSERT INTO {second} VALUES (1, 'a')",
                                           f"ALTER TABLE {second} ADD COLUMN c1 INT NOT NULL DEFAULT 7"), passes=1)
    rows, stopped = stream(plugin, described, lambda: private_mariadb.execute(
        f"INSERT INTO {second} (id, name, c1) VALUES (2, 'b', 5)"))
    assert stopped is None, stopped
    rows = [{**row["__seatide_t1"], ROW_KIND_COLUMN: row[ROW_KIND_COLUMN]} for row in rows
            if row["__seatide_table"] == 1]
    assert applied(rows) == {1: {"id": 1, "name": "a", "c1": 7}, 2: {"id": 2, "name": "b", "c1": 5}}, rows


@pytest.mark.parametrize("change", ["truncate", "drop and create", "statement-logged delete"])
def test_a_rowless_change_between_the_description_and_the_first_batch_is_read_as_the_snapshot_finds_it(
        change, private_mariadb, cdc_database):
    """M1: a TRUNCATE (or a DROP and a CREATE of the same columns, or a DELETE logged as text) after
    the query described the table and before its first batch is in the snapshot, which is read
    after it; the binlog, read from the description on, holds it too. Refused ("start over")
    though nothing is lost; passed over, with the table's changes before it (the snapshot holds
    their outcome), the stream reads on and the rows end as the table is."""
    table = f"{cdc_database}.items"
    create = f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))"
    private_mariadb.execute(create, f"INSERT INTO {table} VALUES (1, 'a')")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())          # the query starts
    rowless = {"truncate": [f"TRUNCATE TABLE {table}"], "drop and create": [f"DROP TABLE {table}", create],
               "statement-logged delete": ["SET SESSION binlog_format = 'STATEMENT'",
                                           f"DELETE FROM {table} WHERE id <= 2", "SET SESSION binlog_format = 'ROW'"]}
    private_mariadb.execute(f"INSERT INTO {table} VALUES (2, 'b')", *rowless[change],
                            f"INSERT INTO {table} VALUES (3, 'c')")
    rows, stopped = stream(plugin, described, lambda: private_mariadb.execute(
        f"INSERT INTO {table} VALUES (4, 'd')"))
    assert stopped is None, stopped
    assert applied(rows) == {3: {"id": 3, "name": "c"}, 4: {"id": 4, "name": "d"}}


def test_a_table_created_again_with_other_columns_before_the_first_batch_is_still_refused(private_mariadb,
                                                                                          cdc_database):
    """M1's bound: created again with other columns than the description's, the table is not the
    one described, and the snapshot would read it with the wrong columns: refused as before."""
    table = f"{cdc_database}.items"
    private_mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))")
    plugin = source(private_mariadb, [table], "schema-changes.enabled = true")
    described = plugin.discover(plugin.server_config())
    private_mariadb.execute(f"DROP TABLE {table}", f"CREATE TABLE {table} (id INT PRIMARY KEY, other INT)")
    rows, stopped = stream(plugin, described)
    assert isinstance(stopped, str) and "was dropped" in stopped, stopped


def test_a_missing_table_is_named_though_it_cannot_be_locked(private_mariadb, cdc_database):
    """The lock taken to describe a table fails on a table that does not exist: the description
    still names the table and the option to fix, not the server's error."""
    from seatide.plugin.base import PermanentError

    plugin = source(private_mariadb, [f"{cdc_database}.missing"])
    with pytest.raises(PermanentError, match=rf"table {cdc_database}\.missing does not exist .* check table-names"):
        plugin.discover(plugin.server_config())
