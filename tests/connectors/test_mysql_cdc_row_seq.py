"""MySQL-CDC's ``__row_seq`` is comparable across every table of the source (finding 3 of issue
30): a sink that merges shards orders one key's changes by it across every route, so a binlog
batch numbers its rows in commit order whatever their table, not each table's from 0."""

from __future__ import annotations

from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from seatide.plugin.tables import TABLE_COLUMN, struct_column
from tests.connectors.test_mysql_cdc import cdc_database, source  # noqa: F401 - the fixture


def tagged_reader(server, tables: list[str], extra: str):
    """The stream reader of several tables alone (no Spark), rows tagged by table as in a job."""
    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    plugin = source(server, [",".join(tables)], f'startup.mode = "latest"\n{extra}')
    found, schema = plugin.discover(plugin.server_config())
    return MySqlCdcReader(stream_options(plugin.server_config(), found, schema.json(), "latest", None,
                                         1_000_000, plugin.table_layout(None)))


def changes_in_seq_order(reader, start, end) -> list[tuple]:
    """(table index, kind, id) of the range's rows, in ``__row_seq`` order."""
    rows = [row for part in reader.partitions(start, end) for batch in reader.read(part)
            for row in batch.to_pylist()]
    seqs = [r[ROW_SEQ_COLUMN] for r in rows]
    assert len(set(seqs)) == len(seqs), f"two rows of one batch share a __row_seq: {sorted(seqs)}"
    return [(r[TABLE_COLUMN], RowKind(r[ROW_KIND_COLUMN]), r[struct_column(r[TABLE_COLUMN])]["id"])
            for r in sorted(rows, key=lambda r: r[ROW_SEQ_COLUMN])]


def test_a_key_moved_between_shards_in_one_transaction_is_ordered_across_them(private_mariadb, cdc_database):  # noqa: F811
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server = private_mariadb
    shards = [f"{cdc_database}.orders_0", f"{cdc_database}.orders_1"]
    for shard in shards:
        server.execute(f"CREATE TABLE {shard} (id INT PRIMARY KEY, note VARCHAR(20))")
    server.execute(f"INSERT INTO {shards[1]} VALUES (7, 'in shard 1')", f"INSERT INTO {shards[0]} VALUES (8, 'in 0')")
    reader = tagged_reader(server, shards, "server-id = 5430")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    with server.connect(database=cdc_database, autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM orders_1 WHERE id = 7")
        cur.execute("INSERT INTO orders_0 VALUES (7, 'moved to shard 0')")
        conn.commit()
        cur.execute("DELETE FROM orders_0 WHERE id = 8")
        cur.execute("INSERT INTO orders_1 VALUES (8, 'moved to shard 1')")
        cur.execute("UPDATE orders_1 SET note = 'edited' WHERE id = 8")
        conn.commit()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert changes_in_seq_order(reader, start, end) == [
        (1, RowKind.DELETE, 7), (0, RowKind.INSERT, 7), (0, RowKind.DELETE, 8), (1, RowKind.INSERT, 8),
        (1, RowKind.UPDATE_BEFORE, 8), (1, RowKind.UPDATE_AFTER, 8)]
