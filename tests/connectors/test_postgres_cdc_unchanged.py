"""Unchanged large values read back by key after a later DDL (finding 14 of issue 30): under the
default replica identity an UPDATE that leaves a TOASTed value alone does not send it, and the
reader selects it from the table when the batch is read. A rename or drop of that column (or of
the key) made after the change but before the batch is read must not fail that batch forever:
the value is found by the column's attnum, which a rename keeps, and a dropped one reads null."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PermanentError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop  # noqa: F401

BIG = "(SELECT string_agg(md5(g::text || %s), '') FROM generate_series(1, 400) g)"   # 12.8 KB: TOASTed


@pytest.mark.parametrize("ddl, expected", [
    ("ALTER TABLE docs RENAME COLUMN body TO content", "stored"),
    ("ALTER TABLE docs RENAME COLUMN id TO ident", "stored"),
    ("ALTER TABLE docs DROP COLUMN body", None),
], ids=["value-renamed", "key-renamed", "value-dropped"])
def test_a_value_left_unchanged_is_read_by_attnum_after_a_later_rename_or_drop(shop, ddl, expected):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, status text, body text)")
    conn.execute(f"INSERT INTO docs VALUES (1, 'new', {BIG})", ("a",))
    stored = conn.execute("SELECT body FROM docs").fetchone()[0]
    reader = reader_for(cdc_source(url, f"{db}.public.docs", 'startup.mode = "latest"'), "renamed")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("UPDATE docs SET status = 'seen' WHERE id = 1")     # body unchanged: not sent
        second = reader.latestOffset(first)
        conn.execute(ddl)                                                 # before the batch is read
        rows = read_rows(reader, first, second)
    finally:
        reader.stop()
    assert [(r[ROW_KIND_COLUMN], r["id"], r["status"]) for r in rows] == [(RowKind.UPDATE_AFTER, 1, "seen")]
    assert rows[0]["body"] == (stored if expected == "stored" else None)


def test_a_batch_read_after_its_table_was_dropped_fails_naming_the_drop(shop):  # noqa: F811
    """A replayed batch is read without being planned again: the lookup by key finds the table
    gone, and says so (finding 19), rather than failing with the server's error on every retry."""
    conn, url, db = shop
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, status text, body text)")
    conn.execute(f"INSERT INTO docs VALUES (1, 'new', {BIG})", ("a",))
    reader = reader_for(cdc_source(url, f"{db}.public.docs", 'startup.mode = "latest"'), "dropped")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("UPDATE docs SET status = 'seen' WHERE id = 1")
        second = reader.latestOffset(first)
        conn.execute("DROP TABLE docs")
        with pytest.raises(PermanentError, match="public.docs was dropped while the job ran"):
            read_rows(reader, first, second)
    finally:
        reader.stop()


def test_a_value_left_unchanged_is_read_by_a_timestamptz_key_whatever_the_servers_time_zone(shop):  # noqa: F811
    """The stream prints a timestamptz key in the replication session's TimeZone and the lookup
    matches it by its text: with the database's TimeZone not UTC and server-time-zone UTC, the
    two printed it differently, the lookup missed, and null overwrote the stored value."""
    conn, url, db = shop
    conn.execute(f"ALTER DATABASE {db} SET TimeZone = 'Asia/Kolkata'")
    conn.execute("CREATE TABLE events (at timestamptz PRIMARY KEY, status text, body text)")
    conn.execute(f"INSERT INTO events VALUES ('2024-05-01 10:00:00+00', 'new', {BIG})", ("a",))
    stored = conn.execute("SELECT body FROM events").fetchone()[0]
    reader = reader_for(cdc_source(url, f"{db}.public.events", 'startup.mode = "latest"'), "tz")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("UPDATE events SET status = 'seen'")             # body unchanged: not sent
        second = reader.latestOffset(first)
        rows = read_rows(reader, first, second)
    finally:
        reader.stop()
    assert [(r[ROW_KIND_COLUMN], r["status"]) for r in rows] == [(RowKind.UPDATE_AFTER, "seen")]
    assert rows[0]["body"] == stored


def test_a_row_found_by_value_but_printed_otherwise_fails_rather_than_nulling(shop):  # noqa: F811
    """A key the lookup finds by value but prints otherwise than the stream did is a mismatch of
    the sessions' settings, not a row gone: it fails naming the key, never writes null."""
    from seatide.connectors.postgres_cdc.stream import connect
    from seatide.connectors.postgres_cdc.tables import describe
    from seatide.connectors.postgres_cdc.unchanged import with_unchanged_values
    from seatide.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST

    conn, url, db = shop
    conn.execute("CREATE TABLE events (at timestamptz PRIMARY KEY, status text, body text)")
    conn.execute(f"INSERT INTO events VALUES ('2024-05-01 10:00:00+00', 'new', {BIG})", ("a",))
    table = describe(conn, "public", "events", None)
    printed = {"at": "2024-05-01 15:30:00+05:30", "status": "seen", "body": UNCHANGED_TOAST}  # another zone
    config = {"host": conn.info.host, "port": conn.info.port, "database": db, "user": "postgres",
              "password": "", "connect_timeout_ms": 10_000, "time_zone": "UTC"}
    with pytest.raises(PermanentError, match="2024-05-01 15:30:00"):
        list(with_unchanged_values([(2, 0, printed)], [table], lambda: connect(config)))
