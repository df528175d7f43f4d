"""Tables and job files for the database tests: a PostgreSQL source table, a MariaDB target."""

from __future__ import annotations

import secrets
from collections import Counter

import psycopg
import pymysql

PG_URL = "jdbc:postgresql://127.0.0.1:5432/test"
MARIADB_URL = "jdbc:mariadb://127.0.0.1:3306/test"


def pg_connect():
    return psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True)


def mariadb_connect():
    # ssl_disabled: without it PyMySQL 1.2 builds a TLS context at every connect (~0.4 s, ~45 ms
    # of CPU) for a server without TLS, and the tests' polls connect several times a second
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database="test", autocommit=True,
                           ssl_disabled=True)


class TablePair:
    """A PostgreSQL table of ``rows`` rows (id, name, amount) and the name of a MariaDB table to fill."""

    def __init__(self, rows: int):
        suffix = secrets.token_hex(4)
        self.rows = rows
        self.source, self.target = f"src_{suffix}", f"dst_{suffix}"
        with pg_connect() as pg:
            pg.execute(f"CREATE TABLE {self.source} (id bigint PRIMARY KEY, name varchar(40), amount numeric(12, 2))")
            pg.execute(f"INSERT INTO {self.source} SELECT g, 'name ' || g, g * 1.5 "
                       f"FROM generate_series(0, {rows - 1}) AS g")

    def target_ids(self) -> Counter:
        with mariadb_connect() as db, db.cursor() as cur:
            try:
                cur.execute(f"SELECT id FROM {self.target}")
            except pymysql.err.ProgrammingError:   # not created yet
                return Counter()
            return Counter(int(row[0]) for row in cur.fetchall())

    def target_rows(self) -> list[tuple]:
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"SELECT id, name, amount FROM {self.target} ORDER BY id")
            return [(int(i), n, float(a)) for i, n, a in cur.fetchall()]

    def drop(self) -> None:
        with pg_connect() as pg:
            pg.execute(f"DROP TABLE IF EXISTS {self.source}")
        with mariadb_connect() as db, db.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.target}")


def pg_to_mariadb_job(tables: TablePair, rows_per_split: int = 500) -> str:
    """BATCH with checkpointing: the Jdbc source reads split by split, the sink has no primary key."""
    return f"""
env {{
  job.name = "pg-to-mariadb"
  job.mode = "BATCH"
  checkpoint.interval = 1000
  micro-batch.max-rows = {rows_per_split}
  job.retry.times = 3
  job.retry.interval.seconds = 1
}}
source {{
  Jdbc {{
    plugin_output = "orders"
    url = "{PG_URL}"
    driver = "org.postgresql.Driver"
    user = "postgres"
    password = ""
    query = "select id, name, amount from {tables.source}"
    partition_column = "id"
    split.size = {rows_per_split}
  }}
}}
transform {{
  Sql {{
    plugin_input = "orders"
    plugin_output = "doubled"
    query = "select id, upper(name) as name, amount * 2 as amount from orders"
  }}
}}
sink {{
  Jdbc {{
    plugin_input = "doubled"
    url = "{MARIADB_URL}"
    driver = "org.mariadb.jdbc.Driver"
    user = "root"
    password = ""
    database = "test"
    table = "{tables.target}"
    generate_sink_sql = true
    schema_save_mode = "CREATE_SCHEMA_WHEN_NOT_EXIST"
    data_save_mode = "APPEND_DATA"
  }}
}}
"""


def assert_each_source_row_once(tables: TablePair) -> None:
    ids = tables.target_ids()
    duplicates = {i: n for i, n in ids.items() if n > 1}
    missing = set(range(tables.rows)) - set(ids)
    assert not duplicates, f"duplicated ids in {tables.target}: {sorted(duplicates.items())[:10]}"
    assert not missing, f"{len(missing)} ids missing from {tables.target}, e.g. {sorted(missing)[:10]}"
    rows = tables.target_rows()
    assert rows[7] == (7, "NAME 7", 21.0), rows[7]
