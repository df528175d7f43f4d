"""MySQL-CDC as a Python streaming data source: offsets are binlog positions (see ``position``).

The first micro-batches of ``startup.mode = initial`` read the snapshot (``snapshot``), a
few key ranges each, and the last of them ends at the binlog position taken just before the
first; every later micro-batch reads the binlog between its start and end positions
(``binlog``), so a replayed batch yields the same changes. Offsets also keep the GTID position
of their binlog position (``gtid``): resumed against another server (a failover), the stream
finds its place there by it instead of by file and byte. The driver side asks the server
where the binlog ends now and cuts the batch at a commit once it may hold ``max_rows`` rows
or before a captured table's DDL (``batch_end``); the workers read. A batch that would start with
an ALTER TABLE the tables' shapes do not hold is not planned: the query stops there, between
batches, and starts again with it applied (``binlog.follow_alter``).
Classes live in an importable module because Spark's Python workers unpickle them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Iterator

import pymysql
from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from seatide.connectors.mysql_cdc.binlog import BinlogRange, follow_alter, read_range, refuse_rowless, tables_at
from seatide.connectors.mysql_cdc.catalog import (CapturedTable, ServerConfig, binlog_files, current_position,
                                                  server_identity, snapshot_position)
from seatide.connectors.mysql_cdc.gtid import advance, gtid_at, gtid_kind, locate
from seatide.connectors.mysql_cdc.position import (BINLOG, SNAPSHOT, START, BinlogPosition, StreamOffset,
                                                   gtid_not_found_message, lost_position_message,
                                                   other_server_message)
from seatide.connectors.mysql_cdc.batch_end import batch_end, logged_statement
from seatide.connectors.mysql_cdc.snapshot import SnapshotSplit, next_upper, read_split
from seatide.connectors.mysql_cdc.snapshot_window import snapshot_since
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.rowkind import PARTITION_SEQ_STRIDE
from seatide.plugin.tables import TableLayout

SOURCE_NAME = "seatide_mysql_cdc"


def stream_options(config: ServerConfig, tables: list[CapturedTable], schema_json: str, startup_mode: str,
                   specific: BinlogPosition | None, max_rows: int = 1_000_000,
                   layout: TableLayout | None = None, behaviour: str | None = None,
                   legacy_tables: list[str] | None = None) -> dict[str, str]:
    return {"config": config.to_json(), "tables": json.dumps([t.to_json() for t in tables]),
            "schema": schema_json, "startup_mode": startup_mode,
            "specific": json.dumps([specific.file, specific.pos] if specific else None),
            "max_rows": str(max(1, max_rows)), "layout": layout.to_json() if layout is not None else "",
            "schema_changes": behaviour or "", "legacy_tables": json.dumps(legacy_tables)}


class MySqlCdcDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.options["schema"]))

    def streamReader(self, schema) -> "MySqlCdcReader":
        return MySqlCdcReader(self.options)


class MySqlCdcReader(DataSourceStreamReader):
    def __init__(self, options):
        self.config_json = options["config"]
        self.tables_json = options["tables"]
        self.startup_mode = options["startup_mode"]
        self.specific = json.loads(options.get("specific") or "null")
        self.max_rows = int(options.get("max_rows") or 1_000_000)
        # several tables: rows tagged by table (plugin.tables); Arrow types made here, not per task
        self.layout = TableLayout.from_json(options["layout"]).prepare_arrow() if options.get("layout") else None
        self.behaviour = options.get("schema_changes") or None
        self.names = [f"{t[0]}.{t[1]}" for t in json.loads(self.tables_json)]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.legacy = json.loads(options.get("legacy_tables") or "null") or self.names
        self._checked_start = False
        self._conn = None      # the driver side's connection, kept across micro-batches
        self._server: str | None = None    # the identity of the server base-url reaches
        self._kind: str | None = None      # its kind of GTIDs (None: none)
        self._gtids: dict = {}             # position -> its GTID position, asked of the server once
        self._moved: dict = {}             # (server, position) of another server -> the place here

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_conn"] = None  # a connection never travels to a worker
        return state

    # Built where needed, never pickled: Columns hold conversion functions.
    def _config(self) -> ServerConfig:
        return ServerConfig.from_json(self.config_json)

    def _tables(self) -> list[CapturedTable]:
        return [CapturedTable.from_json(t) for t in json.loads(self.tables_json)]

    # -- offsets (Spark's driver side) ------------------------------------------------------
    def initialOffset(self) -> dict:
        mode = self.startup_mode
        if mode == "initial":
            return StreamOffset(SNAPSHOT).to_json()
        if mode == "latest":
            return StreamOffset(START, mode="latest").to_json()
        if mode == "specific":
            return StreamOffset.at(BinlogPosition.of(*self.specific)).to_json()
        with self._config().connect() as conn:          # earliest
            return StreamOffset.at(BinlogPosition.of(binlog_files(conn)[0], 4)).to_json()

    def latestOffset(self, start: dict, limit) -> dict:
        conn = self._connection()
        offset = self._here(conn, StreamOffset.from_json(start))
        if offset.phase == SNAPSHOT:
            return self._next_splits(conn, offset).to_json()
        if offset.phase == BINLOG and not self._checked_start:
            self._check_available(conn, offset)
            self._checked_start = True
        if offset.phase == BINLOG and offset.backfill is not None:
            return self._next_backfill(conn, offset).to_json()
        covered = self._covered(offset)
        if offset.phase == BINLOG and set(covered) != set(self.names):     # added or removed, not reordered
            return self._retable(conn, offset, covered).to_json()
        end = current_position(conn)
        if offset.phase == BINLOG and end <= offset.position:
            return start
        if offset.phase != BINLOG:
            return StreamOffset.at(end, self._server, tables=covered, gtid=self._gtid_of(conn, end)).to_json()
        committed: list[str] = []
        opening: list[tuple] = []
        tables = self._tables()
        end = batch_end(conn, offset.position, end, tables, self.max_rows, self._kind, committed, opening)
        self._stop_at_a_change(offset, tables, opening)
        base = offset.gtid or self._gtid_of(conn, offset.position)
        gtid = (base[0], advance(base[0], base[1], committed)) if base is not None else None
        return StreamOffset.at(end, self._server, tables=covered, since=offset.since, gtid=gtid).to_json()

    def _stop_at_a_change(self, offset: StreamOffset, tables: list[CapturedTable], opening: list[tuple]) -> None:
        """A batch whose first transaction is an ALTER TABLE that the shape of its table does not hold
        yet is not planned: the query stops here, between batches (SchemaChanged, binlog.follow_alter),
        and starts again with the statement applied; the batch planned then reads past it. Stopped in
        a batch's task instead, a change would be taken inside a batch Spark has already planned."""
        covered = self._covered(offset)
        captured = {(t.database, t.table): t for t in tables if t.name in covered}
        since = {tuple(name.split(".", 1)): BinlogPosition.of(*at) for name, at in offset.since.items()}
        for here, info, gtid in opening:
            schema, statement = logged_statement(info)
            refuse_rowless(schema, statement, here, tables_at(captured, since, here))
            follow_alter(schema, statement, here, tables_at(captured, since, here), self.behaviour, self._server, gtid)

    # -- which server (a failover) ------------------------------------------------------------
    def _identify(self, conn) -> None:
        if self._server is None:
            self._server = server_identity(conn)
            self._kind = gtid_kind(conn)

    def _gtid_of(self, conn, position: BinlogPosition) -> tuple | None:
        """The GTID position of a position of this server (None: it has no GTIDs)."""
        if self._kind is None:
            return None
        if str(position) not in self._gtids:
            try:
                text = gtid_at(conn, self._kind, position)
            except pymysql.err.MySQLError:      # the offset goes without: only its own server reads it
                text = None
            self._gtids[str(position)] = (self._kind, text) if text is not None else None
        return self._gtids[str(position)]

    def _here(self, conn, offset: StreamOffset) -> StreamOffset:
        """``offset`` as a place on the server base-url reaches now. An offset of another server (a
        failover: a replica promoted) moves to the first transaction its GTID position does not
        hold there; without one, or when this server's binlog does not reach it, the job fails
        for good: reading a same-named file here would skip or repeat changes."""
        self._identify(conn)
        if offset.position is None or offset.server is None or offset.server == self._server:
            return offset
        key = (offset.server, str(offset.position))
        if key not in self._moved:
            if offset.gtid is None:
                raise permanent_in_worker(other_server_message(offset.position, offset.server, self._server))
            kind, text = offset.gtid
            why = None
            if kind != self._kind:
                why = f"it keeps {self._kind or 'no'} GTIDs, not {kind} ones"
            elif offset.backfill is not None or offset.since:
                why = ("tables (added to the job, or described at later positions than others) were still being "
                       "caught up at their own binlog positions of the old server, which cannot be carried over")
            found = locate(conn, kind, text, binlog_files(conn), current_position(conn)) if why is None else None
            if found is None:
                raise permanent_in_worker(gtid_not_found_message(
                    offset.gtid, offset.server, self._server,
                    why or "its binlog does not hold every transaction of that position (not replicated there "
                    "yet, purged from its binlog, or never written there)"))
            self._moved[key] = found
        return replace(offset, position=self._moved[key], server=self._server)

    def _covered(self, offset: StreamOffset) -> tuple[str, ...]:
        """The tables an offset's position covers (a fresh start's: today's)."""
        if offset.position is None:
            return tuple(self.names)
        return offset.tables if offset.tables is not None else tuple(self.legacy)

    def _split_table(self, split: tuple) -> int | None:
        """A split's table in today's list (by name; by index in an offset from before); None: no
        longer captured."""
        name = split[0] if isinstance(split[0], str) else self.legacy[split[0]]
        return self.index.get(name)

    def _splits(self, conn, names, table: int, after) -> tuple[tuple, int, object]:
        """Splits of ``names[table:]`` from key ``after`` on, up to a batch's rows (a table no
        longer captured is passed over): (splits, where the next batch starts)."""
        tables, size = self._tables(), self._config().split_size
        splits: list = []
        while table < len(names) and (not splits or len(splits) * size < self.max_rows):
            index = self.index.get(names[table])
            if index is None:
                table, after = table + 1, None
                continue
            upper = next_upper(conn, tables[index], after, size)
            splits.append((names[table], after, upper))
            table, after = (table, upper) if upper is not None else (table + 1, None)
        return tuple(splits), table, after

    def _next_splits(self, conn, offset: StreamOffset) -> StreamOffset:
        """The next snapshot batch: splits up to max_rows rows, from where the last one stopped.
        The binlog position is taken before the first split is read (see ``snapshot``)."""
        covered = self._covered(offset)
        position, since = offset.position, offset.since
        if position is None:
            position, since = self._snapshot_start(conn, covered)
        gtid = offset.gtid if offset.position is not None else self._gtid_of(conn, position)
        splits, table, after = self._splits(conn, covered, offset.table, offset.after)
        if table >= len(covered):      # the snapshot's last batch: the binlog comes next
            return StreamOffset.at(position, self._server, splits, tables=covered, since=since, gtid=gtid)
        return StreamOffset(SNAPSHOT, position, server=self._server, table=table, after=after, splits=splits,
                            tables=covered, since=since, gtid=gtid)

    # -- tables added to (or removed from) table-names of a resumed job ------------------------
    def _retable(self, conn, offset: StreamOffset, covered: tuple) -> StreamOffset:
        """The stream is between batches and covers other tables than today's: removed ones are
        no longer read (from this offset on), added ones are snapshotted on their own from a
        binlog position taken now, the stream's position staying where the others are."""
        kept = tuple(name for name in covered if name in self.index)
        added = [name for name in self.names if name not in covered]
        if not added:
            return StreamOffset.at(offset.position, self._server, tables=kept, since=offset.since, gtid=offset.gtid)
        point, window = self._snapshot_start(conn, added)
        if self.startup_mode != "initial":
            # no first snapshot for this job (latest, earliest, specific): an added table is
            # read from now on, with none either
            since = {**offset.since, **{name: [point.file, point.pos] for name in added}}
            return StreamOffset(BINLOG, offset.position, server=self._server, tables=(*kept, *added), since=since,
                                gtid=offset.gtid)
        backfill = {"tables": added, "table": 0, "after": None, "file": point.file, "pos": point.pos,
                    "window": window}
        return self._next_backfill(conn, StreamOffset(BINLOG, offset.position, server=self._server, tables=kept,
                                                      backfill=backfill, since=offset.since, gtid=offset.gtid))

    def _snapshot_start(self, conn, names) -> tuple[BinlogPosition, dict]:
        """Where the binlog is read from after a snapshot of ``names``, and where each table's changes
        are read after in it (``since``, snapshot_window.py). From the consistent position now, or,
        where earlier, where the query described a table (its ``ddl_at``): an ALTER TABLE between
        the description and now is then read from the binlog and applied to the shape; taken from
        now, it was in neither, and the rows after it met a layout no statement explained (the
        job failed for good). A change in between comes from the binlog and, maybe, a split too:
        applied by key, as any change made while a split is read."""
        end = snapshot_position(conn)
        files = binlog_files(conn)
        tables = [t for t in self._tables() if t.name in names]
        described = {t.name: BinlogPosition.of(t.ddl_at[0], t.ddl_at[1]) for t in tables
                     if t.ddl_at is not None and t.ddl_at[0] in files
                     and (len(t.ddl_at) < 3 or t.ddl_at[2] in (None, self._server))}
        start = min([end, *described.values()])
        return start, snapshot_since(conn, self._config(), tables, described, start, end, files, self.behaviour,
                                     self._server)

    def _next_backfill(self, conn, offset: StreamOffset) -> StreamOffset:
        """The added tables' next splits; with their last, they join the stream, each read from the
        point taken before its snapshot on (``since``): changes up to it are in the snapshot, a
        change after it and before its split was read comes twice and is applied by key, as in a
        first snapshot (see ``snapshot``)."""
        backfill = offset.backfill
        splits, table, after = self._splits(conn, backfill["tables"], backfill["table"], backfill["after"])
        if table < len(backfill["tables"]):
            return StreamOffset(BINLOG, offset.position, server=self._server, splits=splits, tables=offset.tables,
                                backfill={**backfill, "table": table, "after": after}, since=offset.since,
                                gtid=offset.gtid)
        joined = (*offset.tables, *[name for name in backfill["tables"] if name in self.index])
        window = backfill.get("window") or {}
        since = {**offset.since, **{name: window.get(name, [backfill["file"], backfill["pos"]])
                                    for name in backfill["tables"]}}
        return StreamOffset(BINLOG, offset.position, server=self._server, splits=splits, tables=joined, since=since,
                            gtid=offset.gtid)

    def _connection(self):
        """One connection for the per-trigger position query (a new one costs a TLS set-up)."""
        if self._conn is not None:
            try:
                self._conn.ping(reconnect=False)
                return self._conn
            except Exception:  # gone: the server restarted or closed an idle connection
                self._conn = None
        self._conn = self._config().connect()
        return self._conn

    def _check_available(self, conn, offset: StreamOffset) -> None:
        """A purged start file means lost changes, another server's file other changes: fail
        for good rather than skip or repeat them."""
        position = offset.position
        if offset.server is not None and offset.server != self._server:
            raise permanent_in_worker(other_server_message(position, offset.server, self._server))
        files = binlog_files(conn)
        if position.file not in files:
            raise permanent_in_worker(lost_position_message(position, files[0] if files else None))

    def partitions(self, start: dict, end: dict) -> list:
        begin, stop = StreamOffset.from_json(start), StreamOffset.from_json(end)
        if stop.splits:
            return [SnapshotSplit(index, lower, upper, n * PARTITION_SEQ_STRIDE) for n, (index, lower, upper) in
                    enumerate((self._split_table(split), split[1], split[2]) for split in stop.splits)
                    if index is not None]
        if begin.phase != BINLOG:
            return []
        if any(o.server not in (None, self._server) for o in (begin, stop)):
            # a batch planned on another server, replayed here after a failover: the same
            # transactions, found by their GTIDs
            conn = self._connection()
            begin, stop = self._here(conn, begin), self._here(conn, stop)
        if stop.position <= begin.position:
            return []
        return [BinlogRange(begin.position, stop.position, self._covered(begin), begin.since, self._server)]

    def commit(self, end: dict) -> None:
        """Nothing to release: the server keeps binlogs by its own expiry, not by our progress."""

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- rows (Spark's Python workers) ------------------------------------------------------
    def read(self, partition) -> Iterator:
        config, tables = self._config(), self._tables()
        tag = self.layout.tag if self.layout is not None else None
        if isinstance(partition, SnapshotSplit):
            for batch in read_split(config, tables[partition.table], partition):
                yield batch if tag is None else tag(batch, partition.table)
        else:
            yield from read_range(config, tables, partition, tag, self.behaviour)
