"""Partial row images (a session logging binlog_row_image = MINIMAL) filled by key, against a private
MariaDB: the lookup finds the row whatever the key's type, and an after image whose row is gone by
the time it is read is left out only where a later change in the binlog removes that key."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PERMANENT_MARK, PermanentError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from tests.connectors.test_mysql_cdc import cdc_database, read_range, reader_of  # noqa: F401  (a fixture)

# key type, the key's value as SQL, as the connector presents it: the five the binlog decodes in
# another form than the server stores (ENUM as its index, SET as its bits, BIT as bits, FLOAT widened
# to a double, BINARY(n) without its trailing zero bytes)
KEYS = {
    "enum": ("ENUM('a','b','c')", "'b'", "b"),
    "set": ("SET('x','y','z')", "'x,z'", "x,z"),
    "bit": ("BIT(10)", "b'101'", b"\x00\x05"),
    "float": ("FLOAT", "0.1234567", 0.1234567),
    "binary": ("BINARY(4)", "'ab'", b"ab\x00\x00"),
    # and, without binlog_row_metadata = FULL, an unsigned integer past the signed range as negative
    "bigint unsigned": ("BIGINT UNSIGNED", "18446744073709551000", 18446744073709551000),
}


def minimal(server, *statements: str) -> None:
    """Run ``statements`` in one session that logs MINIMAL row images."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        for statement in statements:
            cur.execute(statement)


def changes(reader, start, end) -> list[tuple]:
    return [(RowKind(r[ROW_KIND_COLUMN]), r["k"] if "k" in r else r["id"], r.get("note"), r.get("n"))
            for r in read_range(reader, start, end)]


@pytest.mark.parametrize("metadata", ["FULL", "NO_LOG"])
@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_column_left_out_of_the_row_image_is_read_by_a_key_of_any_type(private_mariadb, cdc_database, kind,
                                                                         metadata):
    """An UPDATE logged MINIMAL carries the key (before image) and the column it set: the nullable
    column it left out is read from the table by the key, and must be the source's value, not null,
    whether the binlog names and types its columns fully (binlog_row_metadata) or not."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    sql_type, literal, presented = KEYS[kind]
    server, table = private_mariadb, f"{cdc_database}.keyed"
    server.execute(f"CREATE TABLE {table} (k {sql_type} PRIMARY KEY, n INT, note VARCHAR(20))",
                   f"INSERT INTO {table} VALUES ({literal}, 1, 'kept')")
    reader = reader_of(server, [table], "server-id = 5450")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    server.execute(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
    try:
        minimal(server, f"UPDATE {table} SET n = 2 WHERE n = 1")     # (k = 0.1234567 misses the FLOAT)
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = 'FULL'")     # the private server's own setting
    after = [row for row in changes(reader, start, reader.latestOffset(start, ReadAllAvailable()))
             if row[0] == RowKind.UPDATE_AFTER]
    if kind == "float":
        assert after[0][1] == pytest.approx(presented, rel=1e-6)
        after = [(a, presented, *rest) for a, _, *rest in after]
    assert after == [(RowKind.UPDATE_AFTER, presented, "kept", 2)]


GONE = "CREATE TABLE {t} (id INT PRIMARY KEY, n INT, note VARCHAR(20) NOT NULL DEFAULT 'd')"
REMOVALS = {"deleted": ("DELETE FROM {t} WHERE id = 29", [(RowKind.DELETE, 29, "d", 2)]),
            "key moved": ("UPDATE {t} SET id = 55 WHERE id = 29",
                          [(RowKind.UPDATE_BEFORE, 29, "d", 2), (RowKind.UPDATE_AFTER, 55, "d", 2)])}


@pytest.mark.parametrize("removal", sorted(REMOVALS))
@pytest.mark.parametrize("where", ["same batch", "next batch"])
def test_an_after_image_whose_row_a_later_change_removed_is_left_out_not_nulled(private_mariadb, cdc_database,
                                                                               removal, where):
    """Seed 4 merged, reduced: an INSERT of id 29 by a MINIMAL session leaves ``note`` (NOT NULL)
    out, an UPDATE of it too, and a later transaction removes id 29 (a DELETE, or an UPDATE moving
    its key) before the batch is read. Read by key, the row is gone: written with nulls, it fails a
    NOT NULL target. The later removal is certain to be applied after them (in this batch or, when
    the batch ends before it, in the next: the binlog holds it once the row is gone), so the two
    after images are left out; the update's before image stays (it removes the key)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server, table = private_mariadb, f"{cdc_database}.gone"
    statement, removed = REMOVALS[removal]
    server.execute(GONE.format(t=table))
    reader = reader_of(server, [table], "server-id = 5451")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    minimal(server, f"INSERT INTO {table} (id, n) VALUES (29, 1)", f"UPDATE {table} SET n = 2 WHERE id = 29")
    end = reader.latestOffset(start, ReadAllAvailable()) if where == "next batch" else None
    server.execute(statement.format(t=table))
    if where == "same batch":
        end = reader.latestOffset(start, ReadAllAvailable())
    read = changes(reader, start, end)
    if where == "next batch":
        read += changes(reader, end, reader.latestOffset(end, ReadAllAvailable()))
    assert read == [(RowKind.UPDATE_BEFORE, 29, None, None), *removed]


@pytest.mark.parametrize("elsewhere", ["nowhere", "another shard"])
def test_an_after_image_whose_row_is_gone_without_a_logged_removal_fails_the_batch(private_mariadb, cdc_database,
                                                                                   elsewhere):
    """The row is gone but no later change of that table removes the key (deleted with sql_log_bin =
    0; a same-keyed row deleted from another shard merged into the same target does not count):
    nothing is certain to remove it from the target, so the batch fails, naming the row, rather than
    writing nulls or leaving the row out for good."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    server, table, other = private_mariadb, f"{cdc_database}.shard_1", f"{cdc_database}.shard_0"
    server.execute(GONE.format(t=table), GONE.format(t=other), f"INSERT INTO {other} VALUES (29, 0, 'other')")
    reader = reader_of(server, [table, other], "server-id = 5452")
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    minimal(server, f"INSERT INTO {table} (id, n) VALUES (29, 1)", f"UPDATE {table} SET n = 2 WHERE id = 29")
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"DELETE FROM {table} WHERE id = 29")
    if elsewhere == "another shard":
        server.execute(f"DELETE FROM {other} WHERE id = 29")
    end = reader.latestOffset(start, ReadAllAvailable())
    with pytest.raises(PermanentError) as failed:
        changes(reader, start, end)
    message = str(failed.value)
    assert message.startswith(PERMANENT_MARK) and table in message and "29" in message, message
