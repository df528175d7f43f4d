"""Rows of megabytes through Postgres-CDC (finding 13 of issue 30): a batch ends after BATCH_BYTES
of messages as after max_rows rows; Arrow batches are cut by bytes as by rows; and a batch of
changes tells the runtime its bytes when its plan knows them, so the runtime collects it on the
driver only when it is small (runtime/table_routing.py) without measuring it first."""

from __future__ import annotations

from seatide.connectors.postgres_cdc import changes, row_batches
from seatide.connectors.postgres_cdc.row_batches import RowBatches
from seatide.connectors.postgres_cdc.tables import CapturedTable, TableColumn
from seatide.plugin.base import BatchOffsets
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop  # noqa: F401

BIG = "(SELECT string_agg(md5(g::text || %s), '') FROM generate_series(1, 400) g)"   # 12.8 KB: TOASTed


def test_arrow_batches_are_cut_by_bytes_as_by_rows(monkeypatch):
    monkeypatch.setattr(row_batches, "_ARROW_BATCH_BYTES", 2 << 20)
    table = CapturedTable("public", "docs", (TableColumn("id", "int4", "integer", "int"),
                                             TableColumn("body", "text", "text", "string")), ("id",))
    builder = RowBatches([table], "UTC")
    batches = [b for n in range(5) for b in builder.add(0, 0, {"id": str(n), "body": "x" * (1 << 20)})]
    batches += list(builder.flush())
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert [seq for b in batches for seq in b.column("__row_seq").to_pylist()] == [0, 1, 2, 3, 4]


def test_a_batch_ends_after_its_bytes_and_says_how_many_when_it_knows(shop, monkeypatch):  # noqa: F811
    monkeypatch.setattr(changes, "BATCH_BYTES", 100_000)
    conn, url, db = shop
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, status text, body text)")
    conn.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")     # TOASTed, uncompressed
    reader = reader_for(cdc_source(url, f"{db}.public.docs", 'startup.mode = "latest"'), "sizes")
    source = cdc_source(url, f"{db}.public.docs")
    try:
        start = reader.latestOffset(reader.initialOffset())
        for n in range(12):                                   # 12 transactions of 12.8 KB
            conn.execute(f"INSERT INTO docs VALUES (%s, 'new', {BIG})", (n, str(n)))
        first = reader.latestOffset(start)
        assert first["changes"] == 8 and 100_000 <= first["bytes"] < 120_000     # ends at the commit after 100 KB
        assert "lookups" not in first and source.batch_rows(None, None, BatchOffsets(start, first)).bytes == first["bytes"]
        second = reader.latestOffset(first)
        assert second["changes"] == 4
        assert [r["id"] for r in read_rows(reader, start, first) + read_rows(reader, first, second)] == list(range(12))
        reader.commit(second)
        conn.execute("UPDATE docs SET status = 'seen' WHERE id = 1")            # body left out: read by key
        third = reader.latestOffset(second)
        assert third["lookups"] and third["bytes"] < 1000        # the body read by key is not in the message
        rows = source.batch_rows(None, None, BatchOffsets(second, third))
        assert rows.bytes is None and rows.least_bytes == third["bytes"]      # the runtime measures it
    finally:
        reader.stop()
