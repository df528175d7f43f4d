"""Postgres-CDC's ``__row_seq`` is comparable across every table of the source (finding 3's rule
in issue 30): a sink that merges shards orders one key's changes by it across every route. A
batch of changes is one task numbering its transactions' rows in commit order whatever their
table, and a snapshot batch's splits are numbered apart (PARTITION_SEQ_STRIDE)."""

from __future__ import annotations

from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind
from seatide.plugin.tables import TABLE_COLUMN
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop  # noqa: F401


def _changes(rows) -> list[tuple]:
    """(table, kind, id) in ``__row_seq`` order."""
    ordered = sorted(rows, key=lambda r: r[ROW_SEQ_COLUMN])
    return [(r[TABLE_COLUMN], r[ROW_KIND_COLUMN], (r["__seatide_t0"] or r["__seatide_t1"])["id"]) for r in ordered]


def test_a_key_moved_between_shards_in_one_transaction_is_ordered_across_them(shop):  # noqa: F811
    conn, url, db = shop
    for shard in ("orders_0", "orders_1"):
        conn.execute(f"CREATE TABLE {shard} (id int PRIMARY KEY, note text)")
    conn.execute("INSERT INTO orders_1 VALUES (7, 'in shard 1')")
    conn.execute("INSERT INTO orders_0 VALUES (8, 'in shard 0')")
    reader = reader_for(cdc_source(url, f"{db}.public.orders_0,{db}.public.orders_1"), "shards")
    reader.config["split_size"] = 1
    try:
        start = reader.initialOffset()
        snapshot_end = reader.latestOffset(start)
        snapshot = read_rows(reader, start, snapshot_end)
        assert len({r[ROW_SEQ_COLUMN] for r in snapshot}) == len(snapshot) == 2     # one per split, apart
        with conn.transaction():
            conn.execute("DELETE FROM orders_1 WHERE id = 7")
            conn.execute("INSERT INTO orders_0 VALUES (7, 'moved to shard 0')")
        with conn.transaction():
            conn.execute("DELETE FROM orders_0 WHERE id = 8")
            conn.execute("INSERT INTO orders_1 VALUES (8, 'moved to shard 1')")
            conn.execute("UPDATE orders_1 SET note = 'edited' WHERE id = 8")
        end = reader.latestOffset(reader.latestOffset(snapshot_end))
        changes = read_rows(reader, snapshot_end, end) if end != snapshot_end else []
    finally:
        reader.stop()
    assert _changes(changes) == [(1, RowKind.DELETE, 7), (0, RowKind.INSERT, 7),
                                 (0, RowKind.DELETE, 8), (1, RowKind.INSERT, 8), (1, RowKind.UPDATE_AFTER, 8)]
