"""Postgres-CDC keys and the replica identity (finding 12 of issue 30): under REPLICA IDENTITY
DEFAULT or USING INDEX an UPDATE or DELETE logs only the identity's columns of the old row, so a
key the sink applies by must lie within them, or a DELETE arrives with its key null (nothing is
deleted) and an UPDATE of the key leaves the old row behind. Such a table is refused before
anything is created, naming the way out; one whose identity changes so while the job runs fails
it at the first change logged so; a table whose only key is its identity index is keyed by it."""

from __future__ import annotations

import pytest

from seatide.config.loader import ConfigError, load_job_text
from seatide.connectors.postgres_cdc.tables import TableError, describe
from seatide.plugin.base import PERMANENT_MARK, PermanentError
from seatide.plugin.rowkind import ROW_KIND_COLUMN, RowKind
from tests.connectors.test_postgres_cdc import cdc_source, read_rows, reader_for, shop, stream_ctx  # noqa: F401


def _config(db: str, table: str, keys: list[str]) -> str:
    return f'table-names-config = [{{ table = "{db}.public.{table}", primaryKeys = {keys!r} }}]'.replace("'", '"')


@pytest.mark.parametrize("identity, keys, logged", [
    ("USING INDEX accounts_code", None, "code"),         # the primary key is not what a DELETE logs
    ("DEFAULT", ["code"], "id"),                           # primaryKeys other than the primary key
    ("USING INDEX accounts_code", ["id", "code"], "code"),
])
def test_a_key_outside_the_replica_identity_is_refused_with_the_way_out(spark, shop, identity, keys, logged):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, code text NOT NULL, note text)")
    conn.execute("CREATE UNIQUE INDEX accounts_code ON accounts (code)")
    conn.execute(f"ALTER TABLE accounts REPLICA IDENTITY {identity}")
    source = cdc_source(url, f"{db}.public.accounts", _config(db, "accounts", keys) if keys else "")
    with pytest.raises(PermanentError) as caught:
        source.read(stream_ctx(spark, "identity"))
    message = str(caught.value)
    assert "public.accounts" in message and f"logs only [{logged!r}]" in message.replace('"', "'")
    assert "ALTER TABLE public.accounts REPLICA IDENTITY FULL" in message
    assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0


def test_keys_within_the_identity_or_a_full_identity_are_accepted(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE accounts (tenant int, id int, code text NOT NULL, PRIMARY KEY (tenant, id))")
    assert describe(conn, "public", "accounts", ["id"]).keys == ("id",)          # within the primary key
    conn.execute("ALTER TABLE accounts REPLICA IDENTITY FULL")
    assert describe(conn, "public", "accounts", ["code"]).keys == ("code",)


def test_a_table_keyed_only_by_its_identity_index_is_keyed_by_it_and_its_deletes_apply(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE tags (code text NOT NULL, label text)")
    conn.execute("CREATE UNIQUE INDEX tags_code ON tags (code)")
    conn.execute("ALTER TABLE tags REPLICA IDENTITY USING INDEX tags_code")
    conn.execute("INSERT INTO tags VALUES ('a', 'one'), ('b', 'two')")
    source = cdc_source(url, f"{db}.public.tags", 'startup.mode = "latest"')
    assert source.tables()[0].primary_key.columns == ("code",)
    reader = reader_for(source, "index")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("DELETE FROM tags WHERE code = 'a'")
        second = reader.latestOffset(first)
        assert [(r[ROW_KIND_COLUMN], r["code"]) for r in read_rows(reader, first, second)] == [(RowKind.DELETE, "a")]
    finally:
        reader.stop()


def test_an_identity_narrowed_while_the_job_runs_fails_it_at_the_first_change_logged_so(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, code text NOT NULL UNIQUE, note text)")
    conn.execute("ALTER TABLE accounts REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO accounts VALUES (1, 'a', 'x'), (2, 'b', 'y')")
    reader = reader_for(cdc_source(url, f"{db}.public.accounts",
                                   f'startup.mode = "latest"\n{_config(db, "accounts", ["code"])}'), "narrowed")
    try:
        first = reader.latestOffset(reader.initialOffset())
        conn.execute("DELETE FROM accounts WHERE id = 1")                 # logged whole: applies by code
        second = reader.latestOffset(first)
        assert [(r[ROW_KIND_COLUMN], r["code"]) for r in read_rows(reader, first, second)] == [(RowKind.DELETE, "a")]
        reader.commit(second)
        conn.execute("ALTER TABLE accounts REPLICA IDENTITY DEFAULT")
        conn.execute("DELETE FROM accounts WHERE id = 2")                 # logs id alone: code would be null
        with pytest.raises(PermanentError) as caught:
            third = reader.latestOffset(second)
            read_rows(reader, second, third)
    finally:
        reader.stop()
    message = str(caught.value)
    assert message.startswith(PERMANENT_MARK) and "public.accounts" in message and "REPLICA IDENTITY FULL" in message


def test_describe_names_the_identity_and_its_columns(shop):  # noqa: F811
    conn, _, _ = shop
    conn.execute("CREATE TABLE pairs (a int NOT NULL, b int NOT NULL, c int)")
    conn.execute("CREATE UNIQUE INDEX pairs_ab ON pairs (b, a)")
    conn.execute("ALTER TABLE pairs REPLICA IDENTITY USING INDEX pairs_ab")
    table = describe(conn, "public", "pairs", None)
    assert (table.identity, table.identity_key, table.keys) == ("key", ("b", "a"), ("b", "a"))
    with pytest.raises(TableError, match="logs only"):
        describe(conn, "public", "pairs", ["c"])


def _sink_job(url: str, table: str, sink: str) -> str:
    return (f'env {{ job.mode = "STREAMING" }}\n'
            f'source {{ Postgres-CDC {{ base-url = "{url}", username = "postgres", password = "",\n'
            f'  table-names = ["{table}"] }} }}\nsink {{ {sink} }}')


_ICEBERG = 'Iceberg {{ namespace = ns, table = t, iceberg.catalog.config = {{ type = hadoop, warehouse = "/tmp/w" }}, ' \
           'iceberg.table.primary-keys = "{keys}" }}'


@pytest.mark.parametrize("sink, option, outside", [
    ('Jdbc {{ url = "{url}", table = "public.copy", primary_keys = ["email"] }}', "primary_keys", "email"),
    ('Jdbc {{ url = "{url}", table = "public.copy", primary_keys = ["id", "tenant"] }}', "primary_keys", "tenant"),
    (_ICEBERG.replace("{keys}", "email"), "iceberg.table.primary-keys", "email"),
    ('Paimon {{ warehouse = "/tmp/w", database = d, table = t, "paimon.table.primary-keys" = "email" }}',
     "paimon.table.primary-keys", "email"),
])
def test_a_sink_key_outside_what_deletes_log_is_refused_when_the_job_loads(shop, sink, option, outside):  # noqa: F811
    """A DELETE under REPLICA IDENTITY DEFAULT carries only the primary key: a sink applying by
    another column would match nothing (NULL = NULL is never true) and keep the deleted row."""
    conn, url, db = shop
    conn.execute("CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL UNIQUE, tenant int)")
    with pytest.raises(ConfigError) as caught:
        load_job_text(_sink_job(url, f"{db}.public.people", sink.format(url=url)))
    message = str(caught.value)
    assert option in message and f"'{outside}'" in message.replace('"', "'")
    assert "ALTER TABLE public.people REPLICA IDENTITY FULL" in message and "['id']" in message


def test_a_sink_key_within_the_identity_or_a_full_identity_loads(shop):  # noqa: F811
    conn, url, db = shop
    conn.execute("CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL UNIQUE, tenant int)")
    jdbc = 'Jdbc {{ url = "{url}", table = "public.copy", primary_keys = [{keys}] }}'
    load_job_text(_sink_job(url, f"{db}.public.people", jdbc.format(url=url, keys='"id"')))
    conn.execute("ALTER TABLE people REPLICA IDENTITY FULL")
    load_job_text(_sink_job(url, f"{db}.public.people", jdbc.format(url=url, keys='"email", "tenant"')))
