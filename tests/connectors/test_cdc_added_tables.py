"""Tables added to (and removed from) ``table-names`` of a stopped CDC job, at the stream reader (no
Spark): a reader stops at an offset, tables change at the source, and a reader of the new table list
goes on from that offset. The added table gets a snapshot of its own, then only the changes after
it, none twice even without a key; the kept table goes on from its position with no new snapshot;
the removed one is no longer read. (tests/e2e/test_cdc_added_tables.py runs whole jobs.)"""

from __future__ import annotations

import secrets

import pytest

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind


# -- Postgres-CDC ---------------------------------------------------------------------------------

@pytest.fixture
def pg_db(private_postgres):
    name = f"added_{secrets.token_hex(3)}"
    with private_postgres.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = private_postgres.connect(name)
    for table in ("a", "b"):
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {table} SELECT g, '{table}' || g FROM generate_series(1, 20) g")
    yield conn, f"jdbc:postgresql://127.0.0.1:{private_postgres.port}/{name}", name
    conn.close()
    with private_postgres.connect() as admin:
        for slot_name, in admin.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s",
                                        (name,)).fetchall():
            slot.drop(admin, slot_name)
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def pg_source(url: str, db: str, tables: list[str], extra: str = "snapshot.split.size = 4"):
    names = ", ".join(f'"{db}.public.{t}"' for t in tables)
    text = (f'env {{ job.mode = "STREAMING" }}\nsource {{ Postgres-CDC {{ base-url = "{url}", username = "postgres", '
            f'password = "", table-names = [{names}], {extra} }} }}\nsink {{ Console {{}} }}')
    return load_job_text(text).sources[0].plugin


def pg_reader(url: str, db: str, tables: list[str], job_id: str, mode: str = "initial"):
    """The stream reader alone (no Spark), as the source hands it to Spark."""
    from seatide.connectors.postgres_cdc.stream import PostgresCdcReader

    source = pg_source(url, db, tables, f'startup.mode = "{mode}"')
    described = source._describe()
    return PostgresCdcReader({
        "host": source.url.host, "port": source.url.port, "database": source.database, "user": "postgres",
        "password": "", "connect_timeout_ms": 5000, "time_zone": "UTC", "spark_time_zone": "UTC",
        "tables": [t.to_json() for t in described], "slot": slot.default_name(job_id, 0, "source[0]"),
        "startup_mode": mode, "split_size": 10, "fetch_size": 10, "max_rows": 1000,
        "layout": None})


def pg_read(reader, start, end) -> list[tuple]:
    return [(row[ROW_KIND_COLUMN], row.get("id", row.get("at")), row.get("v", row.get("note")))
            for part in reader.partitions(start, end) for batch in reader.read(part) for row in batch.to_pylist()]


def test_postgres_an_added_keyless_table_is_read_once_across_its_snapshot_point(pg_db, monkeypatch):
    """A change committed after the publication took the new table in but before its snapshot's
    point is in the snapshot, and must not come again from the stream: the table has no key, so a
    row read twice would stay twice. One after the point comes from the stream only."""
    from seatide.connectors.postgres_cdc import stream

    conn, url, db = pg_db
    first = pg_reader(url, db, ["a", "b"], "boundary", mode="latest")
    try:
        begun = first.latestOffset(first.initialOffset())           # the slot, at "now"
        conn.execute("UPDATE a SET v = 'streamed' WHERE id = 1")
        stopped = first.latestOffset(begun)
        first.commit(stopped)
    finally:
        first.stop()
    assert stopped["tables"] == ["public.a", "public.b"]
    conn.execute("CREATE TABLE journal (at int, note text)")
    conn.execute("ALTER TABLE journal REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO journal SELECT g, 'before' FROM generate_series(1, 5) g")
    conn.execute("UPDATE a SET v = 'while stopped' WHERE id = 2")
    conn.execute("UPDATE b SET v = 'removed: not read' WHERE id = 2")

    create_slot = stream.replication.create_slot

    def after_the_publication(replication_conn, name, export, temporary=False):
        if temporary:       # the publication lists journal now; the snapshot's point is not taken yet
            conn.execute("INSERT INTO journal VALUES (6, 'between')")
        return create_slot(replication_conn, name, export, temporary)

    monkeypatch.setattr(stream.replication, "create_slot", after_the_publication)
    second = pg_reader(url, db, ["a", "journal"], "boundary")       # journal added, b removed
    try:
        planned = second.latestOffset(stopped)
        assert planned["lsn"] == stopped["lsn"] and planned["tables"] == ["public.a", "public.journal"]
        conn.execute("INSERT INTO journal VALUES (7, 'after')")
        snapshot = pg_read(second, stopped, planned)
        end = second.latestOffset(planned)
        changes = pg_read(second, planned, end)
        second.commit(end)
        assert second.latestOffset(end).get("since") is None          # past the point: no filter left
    finally:
        second.stop()
    assert sorted(snapshot) == [(RowKind.INSERT, i, "before") for i in range(1, 6)] + [(RowKind.INSERT, 6, "between")]
    assert changes == [(RowKind.UPDATE_AFTER, 2, "while stopped"), (RowKind.INSERT, 7, "after")]
    assert not conn.execute("SELECT slot_name FROM pg_replication_slots WHERE temporary").fetchall()
    published = conn.execute("SELECT tablename FROM pg_publication_tables WHERE pubname = %s", (second.slot,))
    assert sorted(r[0] for r in published.fetchall()) == ["a", "journal"]


# -- MySQL-CDC --------------------------------------------------------------------------------------

@pytest.fixture
def mysql_db(private_mariadb):
    name = f"added_{secrets.token_hex(3)}"
    private_mariadb.execute(f"CREATE DATABASE {name}",
                            *[f"CREATE TABLE {name}.{t} (id INT PRIMARY KEY, v VARCHAR(40))" for t in ("a", "b")],
                            *[f"INSERT INTO {name}.{t} SELECT seq, concat('{t}', seq) FROM seq_1_to_20" for t in ("a", "b")])
    yield private_mariadb, name
    private_mariadb.execute(f"DROP DATABASE {name}")


def mysql_source(server, db: str, tables: list[str], extra: str = "snapshot.split.size = 4"):
    names = ", ".join(f'"{db}.{t}"' for t in tables)
    return load_job_text(
        f'env {{ job.mode = "STREAMING" }}\nsource {{ MySQL-CDC {{ base-url = "{server.url}", username = "root", '
        f'password = "", table-names = [{names}], {extra} }} }}\nsink {{ Console {{}} }}').sources[0].plugin


def mysql_reader(server, db: str, tables: list[str], mode: str = "initial"):
    from seatide.connectors.mysql_cdc.stream import MySqlCdcReader, stream_options

    plugin = mysql_source(server, db, tables, f'startup.mode = "{mode}"')
    found, schema = plugin.discover(plugin.server_config())
    return MySqlCdcReader(stream_options(plugin.server_config(), found, schema.json(), mode, None, 1000))


def mysql_read(reader, start, end) -> list[tuple]:
    return [(row[ROW_KIND_COLUMN], row.get("id", row.get("at")), row.get("v", row.get("note")))
            for part in reader.partitions(start, end) for batch in reader.read(part) for row in batch.to_pylist()]


def test_mysql_an_added_keyless_table_skips_the_binlog_its_snapshot_holds(mysql_db):
    """The binlog from the stream's position holds the new table's rows written while the job was
    stopped; they are in the table's snapshot (taken after them), so the stream skips them: the
    table has no key, a row read twice would stay twice. The old table goes on from its position.
    (A change committed while a split is being read may show in both, as in a first snapshot:
    applied by key it converges; docs/connectors/mysql-cdc.md.)"""
    server, db = mysql_db
    first = mysql_reader(server, db, ["a", "b"], mode="latest")
    try:
        begun = first.latestOffset(first.initialOffset(), None)
        server.execute(f"UPDATE {db}.a SET v = 'streamed' WHERE id = 1")
        stopped = first.latestOffset(begun, None)
    finally:
        first.stop()
    assert stopped["tables"] == [f"{db}.a", f"{db}.b"]
    server.execute(f"CREATE TABLE {db}.journal (at INT, note VARCHAR(20))",
                   f"INSERT INTO {db}.journal SELECT seq, 'before' FROM seq_1_to_5",
                   f"UPDATE {db}.a SET v = 'while stopped' WHERE id = 2",
                   f"UPDATE {db}.b SET v = 'removed: not read' WHERE id = 2")
    second = mysql_reader(server, db, ["a", "journal"])                # journal added, b removed
    try:
        planned = second.latestOffset(stopped, None)
        assert (planned["file"], planned["pos"]) == (stopped["file"], stopped["pos"])
        assert planned["tables"] == [f"{db}.a", f"{db}.journal"]
        snapshot = mysql_read(second, stopped, planned)
        server.execute(f"INSERT INTO {db}.journal VALUES (6, 'after')")
        changes, start = [], planned
        while True:
            end = second.latestOffset(start, None)
            if end == start:
                break
            changes += mysql_read(second, start, end)
            start = end
    finally:
        second.stop()
    assert sorted(snapshot) == [(RowKind.INSERT, i, "before") for i in range(1, 6)]
    assert changes == [(RowKind.UPDATE_BEFORE, 2, "a2"), (RowKind.UPDATE_AFTER, 2, "while stopped"),
                       (RowKind.INSERT, 6, "after")]
    assert "since" not in start                 # past the snapshot's point: nothing left to skip


# -- table lists are exact names ----------------------------------------------------------------------

@pytest.mark.parametrize("source, tables, extra, option", [
    ("Postgres-CDC", '"shop.public.orders_.*"', "", "table-names"),
    ("Postgres-CDC", '"shop.public.orders"', 'table-pattern = "shop\\\\.public\\\\.orders_.*"', "table-pattern"),
    ("MySQL-CDC", '"shop.orders", "shop.*"', "", "table-names"),
    ("MySQL-CDC", '"shop.orders"', 'table-pattern = "shop\\\\..*"', "table-pattern"),
])
def test_table_patterns_are_refused_at_check_with_the_way_to_add_a_table(source, tables, extra, option):
    """SeaTunnel's CDC pages know exact table names only: a pattern (Flink CDC's regular expressions,
    a table-pattern option) is refused by name, with how a table created later is captured."""
    from seatide.config.job import ConfigError

    url = "jdbc:postgresql://127.0.0.1:1/shop" if source == "Postgres-CDC" else "jdbc:mysql://127.0.0.1:1/shop"
    with pytest.raises(ConfigError) as refused:
        load_job_text(f'env {{ job.mode = "STREAMING" }}\nsource {{ {source} {{ base-url = "{url}", username = "u", '
                      f'password = "", table-names = [{tables}]\n{extra} }} }}\nsink {{ Console {{}} }}')
    message = str(refused.value)
    assert option in message and "exact" in message and "seatide resume JOB --config" in message


def test_postgres_under_startup_mode_latest_an_added_table_is_read_from_then_on(pg_db):
    """A job that took no snapshot of its tables takes none of an added one either: its changes
    from the resume on, none from before."""
    conn, url, db = pg_db
    first = pg_reader(url, db, ["a"], "latest", mode="latest")
    try:
        stopped = first.latestOffset(first.initialOffset())
    finally:
        first.stop()
    conn.execute("UPDATE b SET v = 'before it was added' WHERE id = 1")
    second = pg_reader(url, db, ["a", "b"], "latest", mode="latest")
    try:
        added = second.latestOffset(stopped)
        assert not added["splits"] and added["tables"] == ["public.a", "public.b"]
        conn.execute("UPDATE b SET v = 'after' WHERE id = 2")
        end = second.latestOffset(added)
        changes = pg_read(second, added, end)
        second.commit(end)
    finally:
        second.stop()
    assert changes == [(RowKind.UPDATE_AFTER, 2, "after")]
    reordered = pg_reader(url, db, ["b", "a"], "latest", mode="latest")
    try:
        assert reordered.latestOffset(end) == end            # the same tables: nothing to add or remove
    finally:
        reordered.stop()
