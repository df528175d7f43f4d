"""The initial snapshot: each table read as key ranges of ``snapshot.split.size`` rows, a few
per micro-batch (as many as ``micro-batch.max-rows`` allows), each range's end found when
its batch is planned and kept in the batch's offset, so that a replay reads the same ranges.

The binlog position is taken *before* the tables are read and the splits are separate
statements (not one transaction), so a change committed while the snapshot runs may show
in the snapshot and again as a binlog change after it. Applying rows by key (upsert,
delete by key) absorbs the repeat; the end state is the source's. Snapshot rows are
INSERTs. A replayed snapshot batch reads its key ranges again as they are then.
"""

from __future__ import annotations

from typing import Iterator

import pymysql
from pyspark.sql.datasource import InputPartition

from seatide.connectors.mysql_cdc.batches import BatchBuilder, record_batches
from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.plugin.rowkind import RowKind


class SnapshotSplit(InputPartition):
    """Rows of one table whose key is in ``[lower, upper)``; None is unbounded. Its rows are
    numbered from ``first_seq`` on (``__row_seq``)."""

    def __init__(self, table: int, lower: tuple | None, upper: tuple | None, first_seq: int = 0):
        super().__init__((table, lower, upper))
        self.table, self.lower, self.upper, self.first_seq = table, lower, upper, first_seq


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def next_upper(conn, table: CapturedTable, lower: list | None, split_size: int) -> list | None:
    """The key that ends the split starting at ``lower`` (exclusive): the key ``split_size`` rows
    on, in JSON form; None when fewer rows remain (the table's last split)."""
    if not table.key:
        return None                # a table without a key is one split
    keys = ", ".join(quote(k) for k in table.key)
    where, params = "", []
    if lower is not None:
        where = f" WHERE ({keys}) >= (" + ", ".join(["%s"] * len(table.key)) + ")"
        params = key_values(lower)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {keys} FROM {quote(table.database)}.{quote(table.table)}{where} "
                    f"ORDER BY {keys} LIMIT 1 OFFSET %s", [*params, split_size])
        row = cur.fetchone()
    return None if row is None else [_json_key(v) for v in row]


def _json_key(value):
    """A key value as JSON holds it (offsets are JSON): bytes as {"b": hex}, dates and decimals as
    text, which MySQL compares with the column's type as it does a literal."""
    if isinstance(value, (bytes, bytearray)):
        return {"b": bytes(value).hex()}
    return value if isinstance(value, (int, str, float)) else str(value)


def key_values(key: list | None) -> list:
    return [bytes.fromhex(v["b"]) if isinstance(v, dict) else v for v in key or []]


def read_split(config: ServerConfig, table: CapturedTable, split: SnapshotSplit) -> Iterator:
    columns = ", ".join(quote(row[0]) for row in table.live)      # retired columns: null (see _rows)
    keys = "(" + ", ".join(quote(k) for k in table.key) + ")"
    marks = "(" + ", ".join(["%s"] * len(table.key)) + ")"
    where, params = [], []
    if split.lower is not None:
        where.append(f"{keys} >= {marks}")
        params += key_values(split.lower)
    if split.upper is not None:
        where.append(f"{keys} < {marks}")
        params += key_values(split.upper)
    sql = f"SELECT {columns} FROM {quote(table.database)}.{quote(table.table)}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    conn = config.connect(cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")    # TIMESTAMP values in UTC, as the binlog has them
            cur.execute(sql, params)
            retired = (None,) * (len(table.described) - len(table.live))
            yield from record_batches(BatchBuilder(table.columns, getattr(split, "first_seq", 0)), _rows(cur, config.fetch_size, retired))
    finally:
        conn.close()


def _rows(cur, fetch_size: int, retired: tuple = ()) -> Iterator:
    while True:
        rows = cur.fetchmany(fetch_size)
        if not rows:
            return
        for row in rows:
            yield row + retired, RowKind.INSERT
