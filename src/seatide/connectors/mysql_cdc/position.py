"""Binlog positions and the stream's offsets.

A position is a binlog file and a byte position in it (``binlog.000007:1234``). We read by
file and position, not by GTID sets: they mean the same on MySQL and MariaDB (whose GTIDs
differ in form and meaning), every server with ``log_bin`` has them without GTID mode,
and they order trivially, which a micro-batch needs to read exactly ``[start, end)``. The
GTID position is kept beside them, to find the place again on another server (``gtid``).

An offset is what Spark checkpoints for each micro-batch, as JSON:

* ``{"phase": "snapshot"}`` — nothing read yet; the next batch takes the binlog position
  *before* it reads the tables, and reads them in batches of splits;
* ``{"phase": "snapshot", "file": F, "pos": P, "server": S, "table": i, "after": k, "splits": [...]}``
  — the snapshot is being read: the batch ending here read ``splits`` (``[table, lower,
  upper]`` key ranges), the next one starts at key ``after`` of table ``i``; ``F:P`` is where
  the binlog is streamed from once the snapshot is done;
* ``{"phase": "start", "mode": "latest"}`` — nothing read; the next batch ends at the
  current position and holds no rows;
* ``{"phase": "binlog", "file": F, "pos": P, "server": S}`` — everything before ``F:P`` of
  server ``S`` is delivered (``splits`` too, when the batch ending here read the snapshot's
  last splits).

Offsets with a position also name the tables they cover (``tables``, ``database.table``, in the
order the snapshot reads them; ``table`` counts in it, splits name their table), so that a job
resumed with tables added to ``table-names`` reads each from where it is: while the added tables
are snapshotted, ``backfill`` is ``{"tables": [...], "table": i, "after": k, "file": F, "pos": P}``
(``F:P`` taken before their first split, the stream's own position not moving); afterwards
``since`` maps each to ``[F, P]``: its binlog events ending at or before ``F:P`` are in its
snapshot and are skipped. An offset without ``tables`` (from before) covers the tables the
pipeline last ran with. ``S`` names the server (MySQL's ``server_uuid``; MariaDB has none, so
  ``server_id:<@@server_id>``): after a failover, a file of the same name on another server
  holds other changes, so a position is only read on the server it came from. Offsets with a
position also keep its GTID position (``gtid``: ``[kind, text]``, see ``gtid``), the transactions
before it in terms every server of the topology shares: against another server, the stream goes
on from the first transaction that position does not hold (stream.py); an offset without one
(from before, or MySQL without ``gtid_mode = ON``) is only read on its own server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from seatide.connectors.cdc_way_out import START_OVER

SNAPSHOT = "snapshot"
START = "start"
BINLOG = "binlog"


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A point in the binlog. Orders by file sequence number, then by byte position."""

    sequence: int
    pos: int
    file: str

    @classmethod
    def of(cls, file: str, pos: int) -> "BinlogPosition":
        suffix = file.rsplit(".", 1)[-1]
        return cls(int(suffix) if suffix.isdigit() else 0, int(pos), file)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True)
class StreamOffset:
    phase: str
    position: BinlogPosition | None = None
    mode: str = ""
    server: str | None = None      # whose binlog the position is in (None: an offset from before)
    table: int = 0                 # snapshot: the table and key the next splits start after
    after: list | None = None
    splits: tuple = ()             # the snapshot splits of the batch ending here
    tables: tuple | None = None    # the tables the position covers (None: an offset from before)
    backfill: dict | None = None   # tables added to a resumed job, while their snapshot is read
    since: dict = field(default_factory=dict)   # added table -> [file, pos] its changes start after
    gtid: tuple | None = None      # (kind, GTID position) of ``position`` (None: not known)

    def to_json(self) -> dict:
        if self.phase == START:
            return {"phase": START, "mode": self.mode}
        if self.position is None:
            return {"phase": self.phase}
        out = {"phase": self.phase, "file": self.position.file, "pos": self.position.pos, "server": self.server}
        if self.phase == SNAPSHOT:
            out.update(table=self.table, after=self.after)
        if self.splits:
            out["splits"] = [list(s) for s in self.splits]
        if self.tables is not None:
            out["tables"] = list(self.tables)
        if self.backfill is not None:
            out["backfill"] = self.backfill
        if self.since:
            out["since"] = self.since
        if self.gtid is not None:
            out["gtid"] = list(self.gtid)
        return out

    @classmethod
    def from_json(cls, data: dict | str) -> "StreamOffset":
        if isinstance(data, str):
            data = json.loads(data)
        phase = data.get("phase")
        if phase in (BINLOG, SNAPSHOT) and "file" in data:
            tables = data.get("tables")
            return cls(phase, BinlogPosition.of(data["file"], data["pos"]), server=data.get("server"),
                       table=data.get("table", 0), after=data.get("after"),
                       splits=tuple(tuple(s) for s in data.get("splits", ())),
                       tables=tuple(tables) if tables is not None else None, backfill=data.get("backfill"),
                       since=dict(data.get("since") or {}),
                       gtid=tuple(data["gtid"]) if data.get("gtid") else None)
        if phase in (SNAPSHOT, START):
            return cls(phase, mode=data.get("mode", ""))
        raise ValueError(f"MySQL-CDC: the checkpoint holds an offset this version cannot read: {data!r}")

    @classmethod
    def at(cls, position: BinlogPosition, server: str | None = None, splits: tuple = (),
           tables: tuple | None = None, since: dict | None = None, gtid: tuple | None = None) -> "StreamOffset":
        """A binlog position; ``since`` entries the position has passed are left out."""
        since = {name: at for name, at in (since or {}).items() if BinlogPosition.of(*at) > position}
        return cls(BINLOG, position, server=server, splits=splits, tables=tables, since=since, gtid=gtid)


def other_server_message(position: BinlogPosition, recorded: str, found: str) -> str:
    return (f"MySQL-CDC: the stream resumes from binlog position {position} of server {recorded}, but "
            f"base-url now reaches server {found} (a failover, or another server behind the same "
            "address). Its binlog file of that name holds other changes, so reading it would skip or "
            f"repeat changes, and the offset has no GTID position to find its place there by (it was written "
            "before offsets kept one, or by a MySQL server without gtid_mode = ON). To copy the tables from "
            f"this server, {START_OVER}.")


def gtid_not_found_message(gtid: tuple, recorded: str, found: str, why: str) -> str:
    return (f"MySQL-CDC: the stream resumes after GTID position {gtid[1] or '(empty)'} ({gtid[0]}) of server "
            f"{recorded}, but base-url now reaches server {found} (a failover, or another server behind the "
            f"same address) and {why}. Reading it from elsewhere would skip or repeat changes. If it is a "
            "replica that has not caught up yet, let it catch up and resume the job; if the transactions are "
            f"lost there, or to copy the tables from this server, {START_OVER}.")


def lost_position_message(position: BinlogPosition, first_available: str | None) -> str:
    available = f" (the oldest binlog on the server is {first_available})" if first_available else ""
    return (f"MySQL-CDC: the stream resumes from binlog position {position} (its checkpoint, or "
            f"startup.specific-offset on a first start), but the server "
            f"no longer has binlog file {position.file}{available}: it was purged, so the changes "
            f"made since the checkpoint are lost and resuming would skip them: {START_OVER}. Keep binlogs longer "
            "(expire_logs_days / binlog_expire_logs_seconds) than a job may be stopped.")


def binlog_behind(position: BinlogPosition, logs: list[tuple[str, int]]) -> tuple[int | None, bool]:
    """(binlog bytes from ``position`` to the server's end, whether its file is gone), given the
    server's binlog files and sizes, oldest first (``SHOW BINARY LOGS``).

    A file older than the server's oldest was purged: the changes after the position are lost
    (None, True). A file the server does not list and that is not older: another server's
    (a failover), nothing is known (None, False)."""
    sizes = dict(logs)
    if position.file not in sizes:
        oldest = BinlogPosition.of(logs[0][0], 0) if logs else None
        return None, oldest is not None and position.sequence < oldest.sequence
    names = [name for name, _ in logs]
    later = names[names.index(position.file) + 1:]
    return max(0, sizes[position.file] - position.pos) + sum(sizes[name] for name in later), False
