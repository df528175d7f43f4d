"""The initial snapshot: each table read as key ranges of about ``snapshot.split.size`` rows.

The binlog position is taken *before* the tables are read and the splits are separate
statements (not one transaction), so a change committed while the snapshot runs may show
in the snapshot and again as a binlog change after it. Applying rows by key (upsert,
delete by key) absorbs the repeat; the end state is the source's. Snapshot rows are
INSERTs. A replayed snapshot batch reads the tables again as they are then.
"""

from __future__ import annotations

from typing import Iterator

import pymysql
from pyspark.sql.datasource import InputPartition

from seatide.connectors.mysql_cdc.batches import BatchBuilder, record_batches
from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.plugin.rowkind import RowKind


class SnapshotSplit(InputPartition):
    """Rows of one table whose key is in ``[lower, upper)``; None is unbounded."""

    def __init__(self, table: int, lower: tuple | None, upper: tuple | None):
        super().__init__((table, lower, upper))
        self.table, self.lower, self.upper = table, lower, upper


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def split_table(conn, index: int, table: CapturedTable, split_size: int) -> list[SnapshotSplit]:
    """Cut a table at every ``split_size``-th key (a table without a key is one split)."""
    if not table.key:
        return [SnapshotSplit(index, None, None)]
    keys = ", ".join(quote(k) for k in table.key)
    sql = (f"SELECT {keys} FROM (SELECT {keys}, ROW_NUMBER() OVER (ORDER BY {keys}) AS __rn "
           f"FROM {quote(table.database)}.{quote(table.table)}) AS k "
           f"WHERE __rn > 1 AND MOD(__rn - 1, %s) = 0 ORDER BY {keys}")
    with conn.cursor() as cur:
        try:
            cur.execute(sql, (split_size,))
        except pymysql.err.ProgrammingError:
            # No window functions (MySQL before 8.0): read the table as one split.
            return [SnapshotSplit(index, None, None)]
        bounds = [tuple(row) for row in cur.fetchall()]
    edges = [None, *bounds, None]
    return [SnapshotSplit(index, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def read_split(config: ServerConfig, table: CapturedTable, split: SnapshotSplit) -> Iterator:
    columns = ", ".join(quote(c.name) for c in table.columns)
    keys = "(" + ", ".join(quote(k) for k in table.key) + ")"
    marks = "(" + ", ".join(["%s"] * len(table.key)) + ")"
    where, params = [], []
    if split.lower is not None:
        where.append(f"{keys} >= {marks}")
        params += split.lower
    if split.upper is not None:
        where.append(f"{keys} < {marks}")
        params += split.upper
    sql = f"SELECT {columns} FROM {quote(table.database)}.{quote(table.table)}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    conn = config.connect(cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")    # TIMESTAMP values in UTC, as the binlog has them
            cur.execute(sql, params)
            yield from record_batches(BatchBuilder(table.columns), _rows(cur, config.fetch_size))
    finally:
        conn.close()


def _rows(cur, fetch_size: int) -> Iterator:
    while True:
        rows = cur.fetchmany(fetch_size)
        if not rows:
            return
        for row in rows:
            yield row, RowKind.INSERT
