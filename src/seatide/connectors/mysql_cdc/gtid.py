"""GTID positions: which transactions a binlog position has passed, in terms any server of a
replication topology shares, so a stream can move to another server after a failover.

A binlog position (``position``) names a byte in one server's file; after a failover the
promoted replica's files have other names and offsets. A GTID names a transaction on every
server that replicated it. Offsets keep both: the position to read from, and the GTID position
of the last whole transaction before it. Resumed against another server, the stream finds on
it the first transaction its GTID position does not hold (``locate``) and reads on from there.

Two kinds, kept apart because they mean different things:

* ``mariadb``: every MariaDB server has GTIDs, ``domain-server-seq``; a position is one GTID
  per replication domain (``@@gtid_binlog_pos``, ``BINLOG_GTID_POS(file, pos)``), a
  transaction ``d-s-n`` is in it when the position's sequence number of domain ``d`` is at least
  ``n``;
* ``mysql``: MySQL with ``gtid_mode = ON``, ``server_uuid:n``; a position is a set of intervals
  per server UUID (``@@gtid_executed``). Without ``gtid_mode = ON`` offsets carry no GTIDs.

Both are read from ``SHOW BINLOG EVENTS``: each file starts with the GTID state before it
(MariaDB's ``Gtid_list``, MySQL's ``Previous_gtids``), each transaction starts with its GTID
(``Gtid``) and ends with a commit (``Xid``, or a statement other than ``BEGIN``).
"""

from __future__ import annotations

import re
from typing import Iterator

from seatide.connectors.mysql_cdc.binlog_events import file_events
from seatide.connectors.mysql_cdc.position import BinlogPosition

MARIADB = "mariadb"
MYSQL = "mysql"

_MARIADB_GTID = re.compile(r"\bGTID\s+(\d+-\d+-\d+)")
_MYSQL_GTID = re.compile(r"GTID_NEXT\s*=\s*'([0-9a-fA-F-]+(?::[A-Za-z_][\w]*)?:\d+)'")


def gtid_kind(conn) -> str | None:
    """The server's kind of GTIDs, or None (MySQL without gtid_mode = ON)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@version")
        if "mariadb" in str(cur.fetchone()[0]).lower():
            return MARIADB
        try:
            cur.execute("SELECT @@gtid_mode")
            mode = str(cur.fetchone()[0]).upper()
        except Exception:  # noqa: BLE001 - a server without GTIDs at all
            return None
    return MYSQL if mode == "ON" else None


# -- the two notations ---------------------------------------------------------------------------
def _mariadb(text: str) -> dict[int, tuple[int, int]]:
    """domain -> (server_id, seq), the highest seq of each domain."""
    out: dict[int, tuple[int, int]] = {}
    for entry in filter(None, (e.strip() for e in text.strip().strip("[]").split(","))):
        domain, server, seq = (int(p) for p in entry.split("-"))
        if domain not in out or seq > out[domain][1]:
            out[domain] = (server, seq)
    return out


def _mariadb_text(state: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(state.items()))


def _mysql(text: str) -> dict[str, list[tuple[int, int]]]:
    """uuid (with its tag, if any) -> merged intervals."""
    out: dict[str, list[tuple[int, int]]] = {}
    for entry in filter(None, (e.strip() for e in text.replace("\n", "").split(","))):
        parts = entry.split(":")
        uuid, tag = parts[0].strip().lower(), ""
        for part in parts[1:]:
            part = part.strip()
            if not part[:1].isdigit():
                tag = part
                continue
            low, _, high = part.partition("-")
            out.setdefault(f"{uuid}:{tag}" if tag else uuid, []).append((int(low), int(high or low)))
    return {key: _merged(spans) for key, spans in out.items()}


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _mysql_text(state: dict[str, list[tuple[int, int]]]) -> str:
    return ",".join(key + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in spans)
                    for key, spans in sorted(state.items()))


def includes(kind: str, state: str, gtid: str) -> bool:
    """Whether the transaction ``gtid`` is in the GTID position ``state``."""
    if kind == MARIADB:
        domain, _server, seq = (int(p) for p in gtid.split("-"))
        return _mariadb(state).get(domain, (0, 0))[1] >= seq
    key, _, number = gtid.lower().rpartition(":")
    return any(lo <= int(number) <= hi for lo, hi in _mysql(state).get(key, ()))


def contains(kind: str, state: str, other: str) -> bool:
    """Whether every transaction of ``other`` is in ``state``."""
    if kind == MARIADB:
        mine = _mariadb(state)
        return all(mine.get(d, (0, 0))[1] >= n for d, (_s, n) in _mariadb(other).items())
    mine = _mysql(state)
    return all(any(a <= lo and hi <= b for a, b in mine.get(key, ())) for key, spans in _mysql(other).items()
               for lo, hi in spans)


def advance(kind: str, state: str, gtids: list[str]) -> str:
    """``state`` with the transactions ``gtids`` (in binlog order) added."""
    if not gtids:
        return state
    if kind == MARIADB:
        merged = _mariadb(state)
        for gtid in gtids:
            domain, server, seq = (int(p) for p in gtid.split("-"))
            merged[domain] = (server, seq)      # later in the binlog: the domain's newest
        return _mariadb_text(merged)
    merged_sets = _mysql(state)
    for gtid in gtids:
        key, _, number = gtid.lower().rpartition(":")
        merged_sets.setdefault(key, []).append((int(number), int(number)))
    return _mysql_text({key: _merged(spans) for key, spans in merged_sets.items()})


# -- reading them from the binlog ----------------------------------------------------------------
def event_gtid(kind: str, info: str) -> str | None:
    """The GTID a ``Gtid`` event of ``SHOW BINLOG EVENTS`` starts a transaction with."""
    found = (_MARIADB_GTID if kind == MARIADB else _MYSQL_GTID).search(info or "")
    return found.group(1) if found else None


def is_commit(event_type: str, info: str) -> bool:
    return event_type == "Xid" or event_type == "Query" and not (info or "").upper().startswith("BEGIN")


def _head_event(kind: str) -> str:
    return "Gtid_list" if kind == MARIADB else "Previous_gtids"


def file_head(conn, kind: str, file: str) -> str | None:
    """The GTID state before ``file``'s first transaction, as the file's first events say."""
    for index, (_at, event_type, _stop, info) in enumerate(file_events(conn, file, 4)):
        if event_type == _head_event(kind):
            return info.strip().strip("[]") if kind == MARIADB else info.strip()
        if index > 8 or event_type == "Gtid":
            break
    return None


def gtid_at(conn, kind: str, position: BinlogPosition) -> str | None:
    """The GTID position of ``position``: the transactions before it. None when unknown."""
    if kind == MARIADB:
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
            row = cur.fetchone()
        return None if row is None or row[0] is None else str(row[0])
    state = file_head(conn, kind, position.file)
    if state is None:
        return None
    pending, done = None, []
    for _at, event_type, stop, info in file_events(conn, position.file, 4):
        if stop > position.pos:
            break
        if event_type == "Gtid":
            pending = event_gtid(kind, info)
        elif pending is not None and is_commit(event_type, info):
            done.append(pending)
            pending = None
    return advance(kind, state, done)


def locate(conn, kind: str, state: str, files: list[str], end: BinlogPosition) -> BinlogPosition | None:
    """Where on this server the stream goes on after the GTID position ``state``: the start of
    the first transaction it does not hold, or ``end`` (the server's current position, taken
    before) when there is none yet. None when this server's binlog does not reach ``state``: it
    lacks a transaction of it (not replicated yet, or purged) or starts after it."""
    start, have = None, None
    for file in reversed(files):
        head = file_head(conn, kind, file)
        if head is not None and contains(kind, state, head):
            start, have = file, head
            break
    if start is None:
        return None
    pending = None
    for file in files[files.index(start):]:
        for at, event_type, stop, info in file_events(conn, file, 4):
            if BinlogPosition.of(file, stop) > end:
                return end if contains(kind, have, state) else None
            if event_type == "Gtid":
                pending = (event_gtid(kind, info), at)
                if pending[0] is not None and not includes(kind, state, pending[0]):
                    return BinlogPosition.of(file, at) if contains(kind, have, state) else None
            elif pending is not None and is_commit(event_type, info):
                if pending[0] is not None:
                    have = advance(kind, have, [pending[0]])
                pending = None
    return end if contains(kind, have, state) else None
