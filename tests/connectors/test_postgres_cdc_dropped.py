"""A captured table dropped, created again or renamed while Postgres-CDC reads it (finding 19 of
issue 30). PostgreSQL logs no row for a DROP TABLE and removes the table from the publication, so
a table created again under the same name is not published: every later change would be lost
without a word, and the target would keep the dropped rows. A renamed table's changes carry the
new name. Each fails the stream naming the table, what happened and the way out: while the job
runs, when it resumes, and while its snapshot is read."""

from __future__ import annotations

import pytest

from seatide.plugin.base import PERMANENT_MARK, PermanentError
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop  # noqa: F401

SHAPE = "(id int PRIMARY KEY, name text, price numeric(10,2), born timestamp, tags text[], flag bool, big bigint)"


def _fails(reader, start, *, what: str) -> str:
    with pytest.raises(PermanentError) as caught:
        end = reader.latestOffset(start)
        read_rows(reader, start, end)
    message = str(caught.value)
    assert message.startswith(PERMANENT_MARK) and "public.items" in message and what in message, message
    assert "submit it again" in message
    return message


@pytest.mark.parametrize("statements, what", [
    (["DROP TABLE items", f"CREATE TABLE items {SHAPE}", "INSERT INTO items (id) VALUES (500)"],
     "dropped and created again"),
    (["DROP TABLE items", f"CREATE TABLE items {SHAPE}", "ALTER PUBLICATION {pub} ADD TABLE items",
      "INSERT INTO items (id) VALUES (500)"], "dropped and created again"),
    (["DROP TABLE items"], "was dropped"),
    (["ALTER TABLE items RENAME TO items_before", "INSERT INTO items_before (id) VALUES (500)"],
     "renamed to public.items_before"),
    (["ALTER PUBLICATION {pub} DROP TABLE items", "INSERT INTO items (id) VALUES (500)"],
     "not in publication"),
], ids=["recreated", "recreated-and-published", "dropped", "renamed", "unpublished"])
def test_a_table_gone_from_the_stream_fails_it_while_the_job_runs(shop, statements, what):  # noqa: F811
    conn, url, db = shop
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "gone")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("INSERT INTO items (id) VALUES (400)")
        for statement in statements:
            conn.execute(statement.format(pub=reader.slot))
        _fails(reader, first, what=what)
    finally:
        reader.stop()


def test_a_table_dropped_and_created_again_while_the_job_was_stopped_fails_its_resume(shop):  # noqa: F811
    conn, url, db = shop
    first_run = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "stopped")
    first = first_run.latestOffset(first_run.initialOffset())
    first_run.commit(first)
    first_run.stop()
    conn.execute("DROP TABLE items")
    conn.execute(f"CREATE TABLE items {SHAPE}")
    conn.execute("INSERT INTO items (id) VALUES (1)")
    resumed = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "stopped")
    try:
        _fails(resumed, first, what="not in publication")
    finally:
        resumed.stop()


def test_a_table_dropped_while_its_snapshot_is_read_fails_the_snapshot(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE notes (id int PRIMARY KEY)")
    reader = reader_for(cdc_source(url, f"{db}.public.notes,{db}.public.items"), "snapshot")
    reader.config["split_size"] = 10
    try:
        first = reader.latestOffset(reader.initialOffset())         # notes (empty), then items' first split
        conn.execute("DROP TABLE items")
        _fails(reader, first, what="was dropped")
    finally:
        reader.stop()
