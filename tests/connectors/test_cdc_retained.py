"""What a CDC source holds on its server (``Source.held``), asked of real private servers: the WAL a
replication slot retains grows while nothing reads it; a binlog position falls behind as the
server writes, and is lost once its file is purged. No Spark: the leader asks these directly."""

from __future__ import annotations

import secrets

from seatide.config.loader import load_job_text
from seatide.connectors.postgres_cdc import slot

JOB = """
env {{ job.mode = "STREAMING" }}
source {{ {source} }}
sink {{ Console {{}} }}
"""


def _source(text: str):
    return load_job_text(JOB.format(source=text), runs_here=True).sources[0].plugin


def test_a_slot_nobody_reads_retains_more_wal_as_the_server_writes(private_postgres):
    table = f"held_{secrets.token_hex(3)}"
    key = f"job{secrets.token_hex(3)}.run1"
    source = _source(f"""Postgres-CDC {{ base-url = "{private_postgres.url}", username = "postgres", password = "",
                         table-names = ["postgres.public.{table}"] }}""")
    name = slot.default_name(key, 1, "source[0]")
    assert source.held(key, 1, "source[0]", None, 5).state == "no slot"
    with private_postgres.connect() as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
    try:
        first = source.held(key, 1, "source[0]", None, 5)
        assert first.holds == name and first.retained_bytes is not None and not first.lost
        with private_postgres.connect() as conn:
            conn.execute(f"INSERT INTO {table} SELECT g, repeat('x', 500) FROM generate_series(1, 2000) g")
        later = source.held(key, 1, "source[0]", None, 5)
        assert later.retained_bytes >= first.retained_bytes + 1_000_000, (first, later)
        assert later.state in ("reserved", "extended")
    finally:
        with private_postgres.connect() as conn:
            slot.drop(conn, name)
            conn.execute(f"DROP TABLE {table}")


def test_a_binlog_position_falls_behind_and_is_lost_once_purged(private_mariadb):
    source = _source(f"""MySQL-CDC {{ base-url = "{private_mariadb.url}", username = "{private_mariadb.user}",
                         password = "{private_mariadb.password}", table-names = ["test.t"], server-id = 5401 }}""")
    table = f"held_{secrets.token_hex(3)}"
    with private_mariadb.connect() as db, db.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    offset = {"phase": "binlog", "file": file, "pos": pos, "server": None}
    assert source.held("j", 1, "source[0]", None, 5).retained_bytes is None
    assert source.held("j", 1, "source[0]", offset, 5).retained_bytes == 0
    private_mariadb.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)",
                            f"INSERT INTO {table} SELECT seq, repeat('x', 500) FROM seq_1_to_1000")
    behind = source.held("j", 1, "source[0]", offset, 5)
    assert behind.retained_bytes > 500_000 and not behind.lost and behind.holds == f"{file}:{pos}"
    with private_mariadb.connect() as db, db.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
        cur.execute("SHOW BINARY LOGS")
        purged = file not in [row[0] for row in cur.fetchall()]
    private_mariadb.execute(f"DROP TABLE {table}")
    if purged:      # MariaDB keeps a file its binlog checkpoint still needs (see test_cdc_jobs)
        gone = source.held("j", 1, "source[0]", offset, 5)
        assert gone.lost and gone.retained_bytes is None and gone.state == "purged"


def test_an_unreachable_server_is_an_error_without_the_password(monkeypatch):
    from contextlib import nullcontext
    from types import SimpleNamespace

    import seatide.coordinator.source_watch as watch

    spec = load_job_text(JOB.format(source="""Postgres-CDC { base-url = "jdbc:postgresql://127.0.0.1:1/postgres",
        username = "postgres", password = "s3cret-pw", table-names = ["postgres.public.t"] }""")).sources[0]
    monkeypatch.setattr(watch, "newest_offset", lambda *args: None)
    store = SimpleNamespace(read=lambda: nullcontext(None))
    found = watch.measure_job(store, SimpleNamespace(job_id="j", run_id="r"),
                              watch.JobSources([(1, 0, spec)], frozenset({"s3cret-pw"})), 2)
    assert len(found) == 1 and found[0].error and found[0].retained_bytes is None
    assert "s3cret-pw" not in found[0].error
