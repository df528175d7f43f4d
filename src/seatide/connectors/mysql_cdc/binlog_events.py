"""Pages of ``SHOW BINLOG EVENTS``: the driver's view of the binlog, without decoding a row.

The batch planner (batch_end.py) and the GTID walk (gtid.py) both list events this way; the one
place keeps them apart from each other (neither imports the other)."""

from __future__ import annotations

from typing import Iterator

PAGE = 2000                                         # events listed per round trip


def page(conn, cur, file: str, pos: int) -> list[tuple]:
    """A page of SHOW BINLOG EVENTS, with ``Info`` read as bytes and decoded leniently: it holds
    logged statements as the client sent them, and a client that inlines a binary value (MariaDB
    Connector/J does, for a Jdbc sink writing bytes into any table of the server) makes it
    invalid UTF-8, which PyMySQL would refuse to decode."""
    unicode, conn.use_unicode = conn.use_unicode, False
    try:
        cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (file, pos, PAGE))
        rows = cur.fetchall()
    finally:
        conn.use_unicode = unicode
    return [tuple(v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v for v in row)
            for row in rows]


def file_events(conn, file: str, pos: int) -> Iterator[tuple]:
    """(start, type, end, info) of the events of ``file`` from ``pos`` on."""
    with conn.cursor() as cur:
        while True:
            rows = page(conn, cur, file, pos)
            if not rows:
                return
            for _log, at, kind, _server, stop, info in rows:
                yield int(at), str(kind), int(stop), str(info or "")
                pos = int(stop)
            if len(rows) < PAGE:
                return
