"""Where a binlog micro-batch ends: at a transaction boundary once it may hold ``max_rows`` rows.

Without a bound a batch holds every change since the last one, so the first batch after a
long stop is the whole backlog: one staging table and one sink transaction of any size. The
end is planned on the driver without decoding a row: ``SHOW BINLOG EVENTS`` lists the events
from the batch's start (the server reads its own file; no row data travels), and the bytes
of the captured tables' row events are counted as rows at a lower bound of a row image's
size (``row_image_bytes``: every fixed-size column at its size, every other at one byte). So
the count is never below the true one, and a batch never holds more than ``max_rows`` rows
unless one transaction alone does (a transaction is never split). The batch ends after the
first commit (``Xid``, or a ``COMMIT``/DDL statement) at which the count reaches ``max_rows``,
or at the position the server reported, whichever comes first. A captured table's DDL starts a
batch of its own: the batch before it ends where its transaction (its GTID event) starts. A DDL
that starts the batch is handed back (``opening``): the stream stops the query at it, before the
batch is planned, when the shape it reads the table with does not hold it yet (stream.py), so a
change is taken between batches and never inside a planned batch's task.

The same walk collects the GTIDs of the transactions the batch holds whole (``gtids``): the
offset's GTID position moves by them (``gtid``).
"""

from __future__ import annotations

import re

from seatide.connectors.mysql_cdc.catalog import CapturedTable, binlog_files
from seatide.connectors.mysql_cdc.binlog_events import page
from seatide.connectors.mysql_cdc.gtid import event_gtid, is_commit
from seatide.connectors.mysql_cdc.position import BinlogPosition
from seatide.connectors.mysql_cdc.statements import DDL, touched

_TABLE_MAP = re.compile(r"table_id: (\d+) \(([^.]+)\.(.+)\)")
_ROWS = re.compile(r"table_id: (\d+)")
# Bytes a value of these types takes in a row image (others: at least 1, their length prefix).
_FIXED = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8, "float": 4,
          "double": 8, "real": 8, "date": 3, "time": 3, "datetime": 5, "timestamp": 4, "year": 1,
          "enum": 1, "set": 1}


def row_image_bytes(table: CapturedTable) -> int:
    """A lower bound of the bytes one row image of ``table`` takes in a rows event."""
    size = (len(table.live) + 7) // 8          # the null bitmap
    for _name, data_type, _column_type, precision, _scale in (row[:5] for row in table.live):
        base = str(data_type).lower()
        if base in ("decimal", "numeric"):
            size += max(1, int(precision or 10) * 4 // 9)
        else:
            size += _FIXED.get(base, 1)
    return max(1, size)


def batch_end(conn, start: BinlogPosition, end: BinlogPosition, tables: list[CapturedTable],
              max_rows: int, gtid_kind: str | None = None, gtids: list | None = None,
              opening: list | None = None) -> BinlogPosition:
    """The end of the batch that starts at ``start``: ``end``, or an earlier commit's end. With a
    ``gtid_kind``, the GTIDs of the transactions committed before that end are appended to
    ``gtids``, in binlog order. A captured table's DDL that is the batch's first transaction is
    appended to ``opening`` as ``(where it ends, its Info, its GTID)``."""
    gtids = gtids if gtids is not None else []
    opening = opening if opening is not None else []
    pending: str | None = None                      # the GTID of the transaction being walked
    captured = {(t.database, t.table): row_image_bytes(t) for t in tables}
    row_bytes: dict[str, int] = {}                  # table id -> its row image bound
    rows = 0.0
    files = binlog_files(conn)
    file, pos = start.file, start.pos
    boundary = start                                # where the transaction being walked starts
    with conn.cursor() as cur:
        while True:
            events = page(conn, cur, file, pos)
            if not events:
                later = files[files.index(file) + 1:] if file in files else []
                if not later or BinlogPosition.of(later[0], 4) >= end:
                    return end
                file, pos = later[0], 4
                if pending is None:
                    boundary = BinlogPosition.of(file, pos)
                continue
            for _log, at, kind, _server, stop, info in events:
                here = BinlogPosition.of(file, stop)
                if here > end:
                    return end
                kind, info = str(kind), str(info or "")
                if kind == "Table_map":
                    found = _TABLE_MAP.search(info)
                    if found and (found.group(2), found.group(3)) in captured:
                        row_bytes[found.group(1)] = captured[(found.group(2), found.group(3))]
                elif kind.startswith(("Write_rows", "Update_rows", "Delete_rows")):
                    found = _ROWS.search(info)
                    if found and found.group(1) in row_bytes:
                        rows += (stop - at) / row_bytes[found.group(1)]
                elif kind == "Query" and _changes_a_table(info, captured):
                    if boundary != start:
                        # a captured table's DDL starts a batch: rows before it and after it never share one
                        return boundary
                    opening.append((here, info, pending))
                if kind == "Gtid" and gtid_kind is not None:
                    pending = event_gtid(gtid_kind, info)
                elif is_commit(kind, info):
                    if pending is not None:
                        gtids.append(pending)
                        pending = None
                    boundary = here
                    if rows >= max_rows:
                        return here
                pos = stop


def _changes_a_table(info: str, captured: dict) -> bool:
    """Whether a logged statement (a Query event's ``Info``) is DDL of a captured table, as the
    reader tells it (statements.py: the planner and the reader never disagree on a statement)."""
    schema, statement = logged_statement(info)
    return bool(touched(statement, schema, captured, DDL)[1])


_USE = re.compile(r"use `((?:[^`]|``)+)`; ", re.IGNORECASE)


def logged_statement(info: str) -> tuple[str | None, str]:
    """A Query event's ``Info`` as (default database, statement): the server shows a statement
    logged with a default database as ``use `db`; statement``."""
    found = _USE.match(info)
    if found is None:
        return None, info
    return found.group(1).replace("``", "`"), info[found.end():]

