"""MySQL-CDC as a Python streaming data source: offsets are binlog positions (see ``position``).

The first micro-batches of ``startup.mode = initial`` read the snapshot (``snapshot``), a
few key ranges each, and the last of them ends at the binlog position taken just before the
first; every later micro-batch reads the binlog between its start and end positions
(``binlog``), so a replayed batch yields the same changes. The driver side asks the server
where the binlog ends now and cuts the batch at a commit once it may hold ``max_rows`` rows
(``batch_end``); the workers read.
Classes live in an importable module because Spark's Python workers unpickle them.
"""

from __future__ import annotations

import json
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from seatide.connectors.mysql_cdc.binlog import BinlogRange, read_range
from seatide.connectors.mysql_cdc.catalog import (CapturedTable, ServerConfig, binlog_files, current_position,
                                                  server_identity, snapshot_position)
from seatide.connectors.mysql_cdc.position import (BINLOG, SNAPSHOT, START, BinlogPosition, StreamOffset,
                                                   lost_position_message, other_server_message)
from seatide.connectors.mysql_cdc.batch_end import batch_end
from seatide.connectors.mysql_cdc.snapshot import SnapshotSplit, next_upper, read_split
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.tables import TableLayout

SOURCE_NAME = "seatide_mysql_cdc"


def stream_options(config: ServerConfig, tables: list[CapturedTable], schema_json: str, startup_mode: str,
                   specific: BinlogPosition | None, max_rows: int = 1_000_000,
                   layout: TableLayout | None = None, behaviour: str | None = None) -> dict[str, str]:
    return {"config": config.to_json(), "tables": json.dumps([t.to_json() for t in tables]),
            "schema": schema_json, "startup_mode": startup_mode,
            "specific": json.dumps([specific.file, specific.pos] if specific else None),
            "max_rows": str(max(1, max_rows)), "layout": layout.to_json() if layout is not None else "",
            "schema_changes": behaviour or ""}


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
        self._checked_start = False
        self._conn = None      # the driver side's connection, kept across micro-batches
        self._server: str | None = None    # the identity of the server base-url reaches

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
        offset = StreamOffset.from_json(start)
        conn = self._connection()
        if self._server is None:
            self._server = server_identity(conn)
        if offset.phase == SNAPSHOT:
            if offset.server is not None and offset.server != self._server:
                raise permanent_in_worker(other_server_message(offset.position, offset.server, self._server))
            return self._next_splits(conn, offset).to_json()
        if offset.phase == BINLOG and not self._checked_start:
            self._check_available(conn, offset)
            self._checked_start = True
        end = current_position(conn)
        if offset.phase == BINLOG and end <= offset.position:
            return start
        if offset.phase == BINLOG:
            end = batch_end(conn, offset.position, end, self._tables(), self.max_rows)
        return StreamOffset.at(end, self._server).to_json()

    def _next_splits(self, conn, offset: StreamOffset) -> StreamOffset:
        """The next snapshot batch: splits up to max_rows rows, from where the last one stopped.
        The binlog position is taken before the first split is read (see ``snapshot``)."""
        position = offset.position or snapshot_position(conn)
        tables, size = self._tables(), self._config().split_size
        table, after, splits = offset.table, offset.after, []
        while table < len(tables) and (not splits or len(splits) * size < self.max_rows):
            upper = next_upper(conn, tables[table], after, size)
            splits.append((table, after, upper))
            table, after = (table, upper) if upper is not None else (table + 1, None)
        if table >= len(tables):      # the snapshot's last batch: the binlog comes next
            return StreamOffset.at(position, self._server, tuple(splits))
        return StreamOffset(SNAPSHOT, position, server=self._server, table=table, after=after, splits=tuple(splits))

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
            return [SnapshotSplit(*split) for split in stop.splits]
        if begin.phase != BINLOG or stop.position <= begin.position:
            return []
        return [BinlogRange(begin.position, stop.position)]

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
