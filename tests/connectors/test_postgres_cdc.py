"""Postgres-CDC on a private PostgreSQL with wal_level = logical: snapshot then changes applied
by row kind reproduce the table; restarts from the checkpoint miss nothing; the slot moves
only after a batch commits; a lost slot fails the resume; release() leaves nothing behind."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
from decimal import Decimal

import pytest

from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot
from seatide.plugin.base import PERMANENT_MARK, PermanentError, ReadContext
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind



def job_text(url: str, table: str, extra: str = "", mode: str = "STREAMING") -> str:
    return (f'env {{ job.mode = "{mode}" }}\n'
            f'source {{ Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "",\n'
            f'  table-names = ["{table}"]\n{extra} }} }}\nsink {{ Console {{}} }}')


def cdc_source(url: str, table: str, extra: str = ""):
    return load_job_text(job_text(url, table, extra)).sources[0].plugin


def stream_ctx(spark, job_id: str, max_rows: int = 10_000) -> ReadContext:
    return ReadContext(spark, micro_batch=True, unbounded=True, parallelism=1, max_rows_per_batch=max_rows,
                       read_interval_ms=300, plugin_id="source[0]", job_id=job_id, pipeline_id=0)


@pytest.fixture
def shop(private_postgres):  # noqa: F811
    """A fresh database with a table of REPLICA IDENTITY FULL and several column types."""
    name = f"pg_cdc_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = private_postgres.connect(name)
    conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), "
                 "born timestamp, tags text[], flag bool, big bigint)")
    conn.execute("ALTER TABLE items REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO items SELECT g, 'item ' || g, g * 1.5, timestamp '2024-01-01' + g * interval '1 s', "
                 "ARRAY['a', 'b,' || g], g % 2 = 0, g::bigint * 1000000000 FROM generate_series(1, 25) g")
    url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{name}"
    yield conn, url, name
    conn.close()
    with private_postgres.connect() as admin:
        for slot_name, in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                        (name,)).fetchall():
            slot.drop(admin, slot_name)    # waits while a stopped query's last peek finishes
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def table_rows(conn) -> dict:
    rows = conn.execute("SELECT id, name, price, born, tags, flag, big FROM items").fetchall()
    return {r[0]: tuple(r) for r in rows}


def assert_numbered_in_order(rows) -> None:
    """A batch's rows, collected in the order its partitions read them, carry increasing
    ``__row_seq`` (the source numbers them: Spark cannot number a stream's rows)."""
    seqs = [row[ROW_SEQ_COLUMN] for row in rows]
    assert seqs == sorted(set(seqs)), seqs


class Replica:
    """Applies emitted rows by kind, keyed by id, as an upsert/delete-by-key sink would."""

    def __init__(self):
        self.rows: dict = {}
        self.kinds: list[int] = []

    def apply(self, batch_df, batch_id):
        rows = batch_df.collect()
        assert_numbered_in_order(rows)
        for row in rows:
            values = row.asDict()
            kind = values.pop(ROW_KIND_COLUMN)
            values.pop(ROW_SEQ_COLUMN)
            self.kinds.append(kind)
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                self.rows[values["id"]] = tuple(values.values())
            else:
                self.rows.pop(values["id"], None)


def start(spark, source, job_id: str, checkpoint: str, replica: Replica):
    df = source.read(stream_ctx(spark, job_id))
    return (df.writeStream.foreachBatch(replica.apply).option("checkpointLocation", checkpoint)
            .trigger(processingTime="300 milliseconds").start())


def _diff(got: dict, expected: dict) -> str:
    keys = sorted(k for k in {*got, *expected} if got.get(k) != expected.get(k))
    return "; ".join(f"{k}: got {got.get(k)} expected {expected.get(k)}" for k in keys[:5])


def wait_until(condition, query=None, timeout: float = 40.0, what: str = "condition", diff=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query is not None and query.exception() is not None:
            raise query.exception()
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f": {diff()}" if diff else ""))


def change_rows(conn, start_id: int):
    conn.execute("INSERT INTO items VALUES (%s, 'new', 9.99, '2025-05-05 05:05:05.123456', '{x,NULL}', "
                 "true, -1)", (start_id,))
    conn.execute("UPDATE items SET name = 'renamed', price = price + 1 WHERE id % 3 = 0")
    conn.execute("UPDATE items SET id = id + 1000 WHERE id = 2")          # a key change
    conn.execute("DELETE FROM items WHERE id % 5 = 0")


def test_snapshot_then_changes_reproduce_the_table_across_a_restart(spark, shop, tmp_path):
    conn, url, db = shop
    source = cdc_source(url, f"{db}.public.items", "snapshot.split.size = 7")
    replica, checkpoint, job = Replica(), str(tmp_path / "cp"), f"j{secrets.token_hex(3)}"
    query = start(spark, source, job, checkpoint, replica)
    try:
        wait_until(lambda: len(replica.rows) == 25, query, what="the snapshot")
        assert set(replica.kinds) == {RowKind.INSERT}
        change_rows(conn, 101)
        expected = table_rows(conn)
        wait_until(lambda: replica.rows == expected, query, what="the changes",
                   diff=lambda: _diff(replica.rows, expected))
        assert {RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE} <= set(replica.kinds)
        assert replica.rows[101][2:5] == (Decimal("9.99"), dt.datetime(2025, 5, 5, 5, 5, 5, 123456), ["x", None])
    finally:
        query.stop()
    change_rows(conn, 202)                          # while the query is stopped
    query = start(spark, cdc_source(url, f"{db}.public.items"), job, checkpoint, replica)
    try:
        conn.execute("INSERT INTO items VALUES (300, 'after restart', 1, NULL, NULL, NULL, NULL)")
        expected = table_rows(conn)
        wait_until(lambda: replica.rows == expected, query, what="the changes after the restart")
    finally:
        query.stop()


def stream_lsn(query) -> int:
    progress = query.lastProgress
    return json.loads(progress["sources"][0]["endOffset"])["lsn"] or 0 if progress else 0


def test_slot_advances_only_after_the_batch_commits(spark, shop, tmp_path):
    conn, url, db = shop
    conn.execute("ALTER TABLE items REPLICA IDENTITY DEFAULT")
    source = cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"')
    name = slot.default_name("adv", 0, "source[0]")
    committed: list[tuple[int, int | None]] = []   # (batch, slot position seen inside the batch)
    peeked: list[int] = []

    def each_batch(batch_df, batch_id):
        rows = batch_df.collect()
        if rows:
            # inside the batch: the changes are delivered but not committed, so still peekable
            peeked.append(len(slot.peek(conn, name)))
            committed.append((batch_id, slot.state(conn, name).confirmed_lsn))
    df = source.read(stream_ctx(spark, "adv"))
    query = (df.writeStream.foreachBatch(each_batch).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        # the slot row shows up before its creation finishes; it has a position once done
        wait_until(lambda: (slot.state(conn, name) or slot.SlotState(None, None)).confirmed_lsn,
                   query, what="the slot")
        created_at = slot.state(conn, name).confirmed_lsn
        conn.execute("DELETE FROM items WHERE id <= 3")
        wait_until(lambda: committed, query, what="the first change batch")
        assert peeked[0] > 0 and committed[0][1] == created_at   # not advanced while the batch ran
        # Spark reports a batch committed when it starts the next one: make one
        conn.execute("DELETE FROM items WHERE id = 4")
        wait_until(lambda: len(committed) >= 2, query, what="the second change batch")
        first_end = committed[1][1]
        assert first_end > created_at                # advanced past the first batch ...
        assert peeked[1] > 0                         # ... but not past the second, still running
        # WAL of tables the source does not read moves an idle stream's position along (an
        # empty batch per 16 MB), and the slot follows when Spark confirms it
        moved_from = slot.state(conn, name).confirmed_lsn
        targets = []
        for table in ("other1", "other2"):
            before = slot.flushed_lsn(conn)      # only an idle batch moves the stream past this
            conn.execute(f"CREATE TABLE {table} AS SELECT g, repeat('x', 200) AS pad "
                         "FROM generate_series(1, 90000) g")
            wait_until(lambda: stream_lsn(query) > before, query, what="an idle batch")
            targets.append(stream_lsn(query))
        assert targets[0] - moved_from >= 16 << 20
        wait_until(lambda: slot.state(conn, name).confirmed_lsn >= targets[0], query,
                   what="the idle slot to move past unrelated WAL")
    finally:
        query.stop()


def test_resume_after_the_slot_is_dropped_fails_naming_the_position(spark, shop, tmp_path):
    conn, url, db = shop
    source = cdc_source(url, f"{db}.public.items")
    replica, checkpoint = Replica(), str(tmp_path / "cp")
    query = start(spark, source, "lost", checkpoint, replica)
    try:
        wait_until(lambda: len(replica.rows) == 25, query, what="the snapshot")
    finally:
        query.stop()
    name = slot.default_name("lost", 0, "source[0]")
    conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
    query = start(spark, source, "lost", checkpoint, replica)
    try:
        wait_until(lambda: not query.isActive, timeout=60, what="the resumed query to fail",
                   diff=lambda: f"slot now {slot.state(conn, name)}, status {query.status}")
        error = str(query.exception())
    finally:
        query.stop()
    assert PERMANENT_MARK in error
    assert f"replication slot '{name}'" in error and "no longer exists" in error
    assert "LSN " in error and 'startup.mode = "initial"' in error and "submit it again" in error
    assert slot.state(conn, name) is None           # failed, never silently re-created


def test_release_drops_slot_and_publication_and_is_idempotent(spark, shop, tmp_path):
    conn, url, db = shop
    source = cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"')
    df = source.read(stream_ctx(spark, "rel"))
    query = (df.writeStream.foreachBatch(lambda d, i: None).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="300 milliseconds").start())
    name = slot.default_name("rel", 0, "source[0]")
    try:
        wait_until(lambda: slot.state(conn, name) is not None, query, what="the slot")
    finally:
        query.stop()
    assert conn.execute("SELECT count(*) FROM pg_publication WHERE pubname = %s", (name,)).fetchone()[0] == 1
    source.release("rel")
    source.release("rel")
    assert slot.state(conn, name) is None
    assert conn.execute("SELECT count(*) FROM pg_publication WHERE pubname = %s", (name,)).fetchone()[0] == 0


def test_batch_jobs_and_missing_tables_are_refused_clearly(spark, shop):
    conn, url, db = shop
    batch = load_job_text(job_text(url, f"{db}.public.items", mode="BATCH")).sources[0].plugin
    with pytest.raises(PermanentError, match='job.mode = "STREAMING"'):
        batch.read(ReadContext(spark, micro_batch=False, unbounded=False, parallelism=1,
                               max_rows_per_batch=100, read_interval_ms=100, plugin_id="source[0]"))
    with pytest.raises(PermanentError, match=r"table public.nothing does not exist"):
        cdc_source(url, f"{db}.public.nothing").read(stream_ctx(spark, "x"))


@pytest.mark.parametrize("extra, option, message", [
    ('startup.mode = "earliest"', "startup.mode", '"initial"'),
    ('startup.mode = "sometimes"', "startup.mode", "one of initial, latest"),
    ('slot.name = "Bad-Name"', "slot.name", "lower-case letters"),
    ('database-names = ["a", "b"]', "database-names", "one database"),
    ("snapshot.split.size = 0", "snapshot.split.size", "at least 1"),
    ('format = "COMPATIBLE_DEBEZIUM_JSON"', "format", "not supported"),
    ("debezium { snapshot.mode = never }", "debezium", "no Debezium engine"),
])
def test_option_errors_name_the_option(extra, option, message):
    with pytest.raises(ConfigError) as caught:
        load_job_text(job_text("jdbc:postgresql://127.0.0.1:5432/shop", "shop.public.items", extra))
    assert caught.value.option == option and message in str(caught.value)


def test_option_errors_for_urls_and_tables():
    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        load_job_text(job_text("jdbc:mysql://127.0.0.1:3306/shop", "shop.public.items"))
    with pytest.raises(ConfigError, match="one source reads one database"):
        load_job_text(job_text("jdbc:postgresql://127.0.0.1:5432/shop", "other.public.items"))


def test_types_map_to_spark_alike_in_snapshot_and_changes(spark, shop, tmp_path):
    conn, url, db = shop
    conn.execute("CREATE TABLE typed (id int2 PRIMARY KEY, f4 float4, n numeric, b bytea, d date, t time, "
                 "tz timestamptz, j jsonb, u uuid, ints int4[], flags bool[])")
    row = ("1.5, 12.345, '\\x00ff', '2024-02-29', '13:14:15.5', '2024-01-01 12:00:00+02', "
           "'{\"a\": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,NULL,3}', '{t,f}'")
    conn.execute(f"INSERT INTO typed VALUES (1, {row})")
    source = cdc_source(url, f"{db}.public.typed")
    rows: list = []
    df = source.read(stream_ctx(spark, "types"))
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "int", "float", "decimal(38,18)", "binary", "date", "time(6)", "timestamp",
        "string", "string", "array<int>", "array<boolean>", "tinyint", "bigint"]
    query = (df.writeStream.foreachBatch(lambda d, i: rows.extend(d.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: len(rows) == 1, query, what="the snapshot row")
        conn.execute(f"INSERT INTO typed VALUES (2, {row})")
        wait_until(lambda: len(rows) == 2, query, what="the change row")
    finally:
        query.stop()
    snapshot, change = (r.asDict() for r in rows)
    snapshot.pop(ROW_SEQ_COLUMN), change.pop(ROW_SEQ_COLUMN)
    assert snapshot.pop(ROW_KIND_COLUMN) == RowKind.INSERT and change.pop(ROW_KIND_COLUMN) == RowKind.INSERT
    assert snapshot.pop("id") == 1 and change.pop("id") == 2
    assert snapshot == change
    assert snapshot["f4"] == 1.5 and snapshot["n"] == Decimal("12.345") and snapshot["b"] == bytearray(b"\x00\xff")
    assert snapshot["d"] == dt.date(2024, 2, 29) and snapshot["t"] == dt.time(13, 14, 15, 500000)
    assert snapshot["tz"] == dt.datetime(2024, 1, 1, 10, 0)      # the session time zone is UTC
    assert snapshot["ints"] == [1, None, 3] and snapshot["flags"] == [True, False]
    assert snapshot["j"] == '{"a": 1}' and snapshot["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


def reader_for(source, job_id: str):
    """The stream reader alone (no Spark): what the source hands Spark, for offset-level checks."""
    from seatide.connectors.postgres_cdc.stream import PostgresCdcReader

    from seatide.plugin.tables import TableLayout

    tables = source._describe()
    layout = TableLayout.of((source._name(t.schema, t.name), source._fields(t)) for t in tables) \
        if len(tables) > 1 else None
    return PostgresCdcReader({
        "host": source.url.host, "port": source.url.port, "database": source.database, "user": "postgres",
        "password": "", "connect_timeout_ms": 5000, "time_zone": "UTC", "spark_time_zone": "UTC",
        "tables": [t.to_json() for t in tables], "columns": [c.name for c in tables[0].columns],
        "slot": source.opts["slot.name"] or slot.default_name(job_id, 0, "source[0]"),
        "slot_given": bool(source.opts["slot.name"]), "startup_mode": source.opts["startup.mode"],
        "split_size": 10, "fetch_size": 10, "max_rows": 1000, "infinity": source.opts["infinity.handling"],
        "layout": layout.to_json() if layout else None})


def read_rows(reader, start, end) -> list[dict]:
    return [row for part in reader.partitions(start, end) for batch in reader.read(part)
            for row in batch.to_pylist()]


def test_key_changes_without_full_identity_and_an_outrun_checkpoint(shop):
    conn, url, db = shop
    conn.execute("ALTER TABLE items REPLICA IDENTITY DEFAULT")
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "keys")
    try:
        first = reader.latestOffset(reader.initialOffset())          # creates the slot
        conn.execute("UPDATE items SET id = 500, name = 'moved' WHERE id = 7")
        second = reader.latestOffset(first)
        rows = read_rows(reader, first, second)
        assert [(r[ROW_KIND_COLUMN], r["id"], r["name"]) for r in rows] == [
            (RowKind.UPDATE_BEFORE, 7, None), (RowKind.UPDATE_AFTER, 500, "moved")]
        reader.commit(second)
        conn.execute("INSERT INTO items (id) VALUES (9999)")
        third = reader.latestOffset(second)
        reader.commit(third)
    finally:
        reader.stop()
    stale = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "keys")
    with pytest.raises(PermanentError, match="has already moved on") as caught:
        stale.latestOffset(first)                                    # a checkpoint older than the slot
    assert str(caught.value).startswith(PERMANENT_MARK) and slot.format_lsn(first["lsn"]) in str(caught.value)
    stale.stop()


def test_large_numerics_keep_every_digit_and_what_does_not_fit_is_refused(shop):
    """An unconstrained numeric is decimal(38, 18): 20 integer digits fit, in the snapshot and in
    changes alike; a value with more, or NaN, fails the job naming the column, never becomes
    null (finding 5 of issue 22)."""
    conn, url, db = shop
    conn.execute("CREATE TABLE amounts (id int PRIMARY KEY, n numeric, m numeric(30, 4))")
    conn.execute("INSERT INTO amounts VALUES (1, 12345678901.5, 12345678901234567890123456.1234), "
                 "(2, -99999999999999999999.999999999999999999, NULL), (3, 0.000000000000000001, 1)")
    reader = reader_for(cdc_source(url, f"{db}.public.amounts"), "numerics")
    expected = {1: (Decimal("12345678901.500000000000000000"), Decimal("12345678901234567890123456.1234")),
                2: (Decimal("-99999999999999999999.999999999999999999"), None),
                3: (Decimal("1E-18"), Decimal("1.0000"))}         # 18 decimals: all kept (more fail)
    try:
        first = reader.latestOffset(reader.initialOffset())
        assert {r["id"]: (r["n"], r["m"]) for r in read_rows(reader, reader.initialOffset(), first)} == expected
        conn.execute("INSERT INTO amounts SELECT id + 10, n, m FROM amounts")
        second = reader.latestOffset(first)
        changes = {r["id"] - 10: (r["n"], r["m"]) for r in read_rows(reader, first, second)}
        assert changes == expected
        reader.commit(second)
        conn.execute("INSERT INTO amounts VALUES (20, 123456789012345678901, 1)")   # 21 integer digits
        third = reader.latestOffset(second)
        with pytest.raises(PermanentError) as caught:
            read_rows(reader, second, third)
        assert "public.amounts" in str(caught.value) and "column n" in str(caught.value)
        assert "123456789012345678901" in str(caught.value) and "decimal(38, 18)" in str(caught.value)
    finally:
        reader.stop()


def test_a_table_without_a_replica_identity_is_refused_before_any_publication(spark, shop):
    """A publication on a table without primary key or replica identity makes the application's
    own UPDATE and DELETE fail; the source refuses such a table with the fix, before it creates
    anything, even when table-names-config gives it primaryKeys (finding 4 of issue 22)."""
    conn, url, db = shop
    conn.execute("CREATE TABLE keyless (id int, name text)")
    conn.execute("INSERT INTO keyless VALUES (1, 'a')")
    for extra in ("", f'table-names-config = [{{ table = "{db}.public.keyless", primaryKeys = ["id"] }}]'):
        source = cdc_source(url, f"{db}.public.keyless", extra)
        with pytest.raises(PermanentError) as caught:
            source.read(stream_ctx(spark, "keyless"))
        message = str(caught.value)
        assert "public.keyless" in message and "ALTER TABLE public.keyless REPLICA IDENTITY FULL" in message
    assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0
    conn.execute("UPDATE keyless SET name = 'b'")             # the application is not disturbed
    conn.execute("ALTER TABLE keyless REPLICA IDENTITY FULL")
    assert cdc_source(url, f"{db}.public.keyless").read(stream_ctx(spark, "keyless")).isStreaming


def test_unchanged_large_values_under_the_default_replica_identity_are_not_nulled(shop):
    """pgoutput leaves out a TOASTed value an UPDATE did not change ('u'); under REPLICA IDENTITY
    DEFAULT the old row does not carry it either. The change row must carry the value, not null
    (which an upsert would write over the target's copy: finding 3 of issue 22)."""
    conn, url, db = shop
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, status text, body jsonb, note text)")
    big = "(SELECT jsonb_build_object('pad', string_agg(md5(g::text || %s), '')) FROM generate_series(1, 300) g)"
    conn.execute(f"INSERT INTO docs VALUES (1, 'new', {big}, 'n1'), (2, 'new', {big}, 'n2')", ("a", "b"))
    reader = reader_for(cdc_source(url, f"{db}.public.docs", 'startup.mode = "latest"'), "toast")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("UPDATE docs SET status = 'x' WHERE id = 1")
        conn.execute("UPDATE docs SET status = 'y', note = NULL WHERE id = 2")
        second = reader.latestOffset(first)
        rows = read_rows(reader, first, second)
    finally:
        reader.stop()
    stored = dict(conn.execute("SELECT id, body::text FROM docs").fetchall())
    assert len(stored[1]) > 9000                          # stored out of line (TOAST)
    after = {r["id"]: r for r in rows if r[ROW_KIND_COLUMN] == RowKind.UPDATE_AFTER}
    assert after[1]["status"] == "x" and after[1]["body"] == stored[1]
    assert after[2]["status"] == "y" and after[2]["body"] == stored[2] and after[2]["note"] is None


def test_the_snapshot_is_the_table_at_the_slots_consistent_point(shop):
    """A row committed after the slot is created but before its split is read arrives once, as a
    change, not also in the snapshot: splits read the snapshot the slot exported. A keyless
    table (REPLICA IDENTITY FULL) applied by an append-only sink would show it twice
    (finding 10 of issue 22)."""
    conn, url, db = shop
    conn.execute("CREATE TABLE journal (at int, note text)")
    conn.execute("ALTER TABLE journal REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO journal SELECT g, 'before' FROM generate_series(1, 5) g")
    reader = reader_for(cdc_source(url, f"{db}.public.journal"), "aligned")
    try:
        start = reader.initialOffset()
        planned = reader.latestOffset(start)                 # creates the slot; the split is planned
        conn.execute("INSERT INTO journal VALUES (6, 'after the slot')")
        snapshot = read_rows(reader, start, planned)
        changes_end = reader.latestOffset(planned)
        changes = read_rows(reader, planned, changes_end)
    finally:
        reader.stop()
    assert sorted(r["at"] for r in snapshot) == [1, 2, 3, 4, 5]
    assert [(r["at"], r[ROW_KIND_COLUMN]) for r in changes] == [(6, RowKind.INSERT)]


def test_a_snapshot_replayed_after_its_export_is_gone_reads_keyed_tables_now_and_refuses_keyless_ones(shop):
    """The exported snapshot dies with the driver that created the slot. A replayed split of a
    keyed table is read as it is now (applied by key it converges); one of a keyless table would
    leave rows twice, so the stream fails naming the way out."""
    conn, url, db = shop
    conn.execute("CREATE TABLE journal (at int, note text)")
    conn.execute("ALTER TABLE journal REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO journal VALUES (1, 'a')")
    for table, keyless in (("items", False), ("journal", True)):
        first = reader_for(cdc_source(url, f"{db}.public.{table}"), f"gone{table}")
        start = first.initialOffset()
        planned = first.latestOffset(start)
        first.stop()                                         # the driver is gone, and its export
        again = reader_for(cdc_source(url, f"{db}.public.{table}"), f"gone{table}")
        try:
            if keyless:
                with pytest.raises(PermanentError, match="no key to apply"):
                    read_rows(again, start, planned)
            else:
                assert len(read_rows(again, start, planned)) == 25
        finally:
            again.stop()


def test_a_latin1_database_decodes_changes_in_its_own_encoding(private_postgres):
    """pgoutput sends text in the database's encoding, not UTF-8 (low finding of issue 22)."""
    name = f"pg_latin_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    url = f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{name}"
    try:
        with private_postgres.connect(name) as conn:
            conn.execute("CREATE TABLE café (id int PRIMARY KEY, note text)")
            reader = reader_for(cdc_source(url, f"{name}.public.café", 'startup.mode = "latest"'), "latin")
            try:
                first = reader.latestOffset(reader.initialOffset())
                conn.execute("INSERT INTO café VALUES (1, 'crème brûlée')")
                second = reader.latestOffset(first)
                assert [(r["id"], r["note"]) for r in read_rows(reader, first, second)] == [(1, "crème brûlée")]
            finally:
                reader.stop()
    finally:
        with private_postgres.connect() as admin:
            for slot_name, in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                            (name,)).fetchall():
                slot.drop(admin, slot_name)
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("inline_bytes", [1000, 8 << 20], ids=["streamed-again", "inline"])
def test_planning_a_batch_keeps_no_rows_and_a_lagging_slot_costs_no_rereads(shop, monkeypatch, inline_bytes):
    """Finding 7 of issue 22: batches are planned from their own start over the replication
    protocol and hand the task a position range (with the messages only when they are small),
    so the driver holds no backlog; two batches planned before either is confirmed (as Spark
    does) split it exactly. Time and memory over large backlogs: bench/cdc_backlog.py."""
    import pickle

    from seatide.connectors.postgres_cdc import changes

    monkeypatch.setattr(changes, "INLINE_BYTES", inline_bytes)
    conn, url, db = shop
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "backlog")
    reader.max_rows = 300
    try:
        start = reader.latestOffset(reader.initialOffset())
        for first in range(1000, 2000, 100):          # ten transactions of 100 rows
            conn.execute("INSERT INTO items (id) SELECT g FROM generate_series(%s::int, %s::int) g", (first, first + 99))
        one = reader.latestOffset(start)
        two = reader.latestOffset(one)                # the slot still at ``start``
        (part,) = reader.partitions(start, one)
        assert (len(pickle.dumps(part)) < 1000) == (inline_bytes == 1000) and one["changes"] == 300
        ids = [r["id"] for r in read_rows(reader, start, one)] + [r["id"] for r in read_rows(reader, one, two)]
        assert ids == list(range(1000, 1600))
    finally:
        reader.stop()


@pytest.mark.parametrize("statements, message", [
    # TRUNCATE has no row kind: skipped, the target would keep every deleted row (finding 8)
    (["DELETE FROM items WHERE id = 1", "TRUNCATE items"], "public.items was truncated"),
    # converters are chosen when the job starts: a new type's values must not be read with them
    (["ALTER TABLE items ALTER COLUMN big TYPE text", "INSERT INTO items (id, big) VALUES (1000, 'x')"],
     "column big changed type"),
    # a dropped column would be null in every later change
    (["ALTER TABLE items DROP COLUMN tags", "UPDATE items SET name = 'x' WHERE id = 1"], "lost columns ['tags']"),
], ids=["truncate", "retyped", "dropped"])
def test_changes_the_stream_cannot_carry_fail_it_loudly(shop, statements, message):
    conn, url, db = shop
    reader = reader_for(cdc_source(url, f"{db}.public.items", 'startup.mode = "latest"'), "loud")
    try:
        first = reader.latestOffset(reader.initialOffset())
        for statement in statements:
            conn.execute(statement)
        with pytest.raises(PermanentError) as caught:     # a changed table fails already when planned
            second = reader.latestOffset(first)
            read_rows(reader, first, second)
    finally:
        reader.stop()
    assert str(caught.value).startswith(PERMANENT_MARK) and message in str(caught.value)
    assert "submit it again" in str(caught.value)


@pytest.mark.parametrize("plugin", ["decoderbufs", "wal2json", "wal2json_rds_streaming", "pgoutput"])
def test_any_decoding_plugin_is_accepted_with_a_warning_that_pgoutput_is_read(plugin):
    """SeaTunnel's own jobs say decoderbufs or wal2json: the job means the same with pgoutput,
    which needs no server plug-in, so it loads with a warning (item 3 of issue 23)."""
    job = load_job_text(job_text("jdbc:postgresql://127.0.0.1:5432/shop", "shop.public.items",
                                 f'decoding.plugin.name = "{plugin}"'))
    warnings = [str(w) for w in job.warnings]
    if plugin == "pgoutput":
        assert warnings == []
    else:
        (warning,) = warnings
        assert "decoding.plugin.name" in warning and plugin in warning and "pgoutput" in warning


def test_tables_of_different_shapes_stream_through_one_slot_tagged_by_table(spark, shop, tmp_path):
    """Several tables, each of its own columns, through ONE slot and publication: each row carries
    its table (plugin.tables), and each table read back out of the stream equals its source."""
    conn, url, db = shop
    conn.execute("CREATE TABLE notes (id int PRIMARY KEY, body text, at date)")
    conn.execute("INSERT INTO notes SELECT g, 'note ' || g, date '2024-01-01' + g FROM generate_series(1, 9) g")
    source = cdc_source(url, f"{db}.public.items,{db}.public.notes", "snapshot.split.size = 4")
    assert source.multi_table()
    assert [t.table for t in source.tables()] == [f"{db}.public.items", f"{db}.public.notes"]
    assert source.tables()[1].primary_key.columns == ("id",)
    job = f"j{secrets.token_hex(3)}"
    df = source.read(stream_ctx(spark, job))
    layout = source.table_layout(None)
    replicas = {0: {}, 1: {}}

    def apply(batch_df, _batch_id):
        for index, rows in replicas.items():
            emitted = layout.table_frame(batch_df, index).collect()
            assert_numbered_in_order(emitted)
            for row in emitted:
                values = row.asDict()
                kind = values.pop(ROW_KIND_COLUMN)
                values.pop(ROW_SEQ_COLUMN)
                if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                    rows[values["id"]] = tuple(values.values())
                else:
                    rows.pop(values["id"], None)

    query = (df.writeStream.foreachBatch(apply).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: len(replicas[0]) == 25 and len(replicas[1]) == 9, query, what="both snapshots")
        change_rows(conn, 101)
        conn.execute("UPDATE notes SET body = 'edited' WHERE id < 4")
        conn.execute("DELETE FROM notes WHERE id = 9")
        expected_items = table_rows(conn)
        expected_notes = {r[0]: tuple(r) for r in conn.execute("SELECT id, body, at FROM notes").fetchall()}
        wait_until(lambda: replicas[0] == expected_items and replicas[1] == expected_notes, query,
                   what="the changes of both tables", diff=lambda: _diff(replicas[1], expected_notes))
    finally:
        query.stop()
    slots = conn.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s", (db,)).fetchone()[0]
    assert slots == 1
