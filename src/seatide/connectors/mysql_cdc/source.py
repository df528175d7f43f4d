"""MySQL-CDC: a snapshot of MySQL/MariaDB tables, then every change from their binlog.

Only STREAMING jobs: a change stream has no end. Rows carry ``__row_kind`` (snapshot rows
and inserts INSERT; updates UPDATE_BEFORE then UPDATE_AFTER; deletes DELETE). The schema
is read from the server when the job starts, with SeaTunnel's type mapping (``columns``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from seatide.connectors.cdc_evolution import change_behaviour
from seatide.connectors.cdc_tables import pattern_refusal, split_names
from seatide.connectors.jdbc.url import MYSQL, JdbcUrl, JdbcUrlError
from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.mysql_cdc.catalog import (CapturedTable, CatalogError, ServerConfig, binlog_files,
                                                  check_binlog, described_at, server_identity)
from seatide.connectors.mysql_cdc.columns import UnsupportedColumn
from seatide.connectors.mysql_cdc.ddl import UnknownDdl
from seatide.connectors.mysql_cdc.options import MYSQL_CDC_OPTIONS, SERVER_ID_RANGE
from seatide.connectors.mysql_cdc.position import BinlogPosition, StreamOffset, binlog_behind, lost_position_message
from seatide.connectors.mysql_cdc.shapes import ShapeError, after_ddl, numbered
from seatide.plugin.base import HeldPosition, PermanentError, ReadContext, Source, use_python_data_source
from seatide.plugin.evolution import COLUMN_ID, RETIRED
from seatide.plugin.options import OptionError
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, RowKind, hidden_fields
from seatide.plugin.schema import Column, PrimaryKey, Schema
from seatide.plugin.tables import TableLayout
from seatide.plugin.unasked import servers_asked
from seatide.plugin.types import SOURCE_DEFAULT, SOURCE_NOT_NULL, source_metadata

_MYSQL = "seatide.mysql_column"     # field metadata: the column's description (name, types, charset)
_DDL_AT = "seatide.mysql_ddl_at"    # field metadata: the binlog position [file, pos, server] the table's shape is of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


@register
class MySqlCdcSource(Source):
    """Captures ``table-names`` from a MySQL or MariaDB server with ``log_bin`` on, ROW format
    and FULL row images: first a snapshot (``startup.mode = initial``), then the binlog."""

    plugin_name = "MySQL-CDC"
    options = MYSQL_CDC_OPTIONS
    doc = __doc__ or ""
    # Tables added to a stopped job are snapshotted on their own when it resumes (stream.py);
    # database-names only checks table-names
    table_list_options = ("table-names", "table-names-config", "database-names")

    # -- validation ----------------------------------------------------------------------
    def check(self) -> None:
        try:
            self._url = JdbcUrl.parse(self.opts["base-url"])
        except JdbcUrlError as exc:
            raise self.invalid("base-url", f"base-url: {exc}") from None
        if self._url.dialect != MYSQL:
            raise self.invalid("base-url", f"base-url '{self._url.text}' is not a MySQL or MariaDB "
                               "URL: MySQL-CDC reads jdbc:mysql://host:3306/db or jdbc:mariadb://...")
        self._tables = self._table_names()
        self._keys = self._table_keys()
        self._catalog: list | None = None        # tables(), asked of the server once
        self._layout: TableLayout | None = None
        self._ctx: ReadContext | None = None      # read()'s: the shapes the pipeline ran with
        self._read_tables: list = []
        self._check_modes()
        self._server_id = self._parse_server_id()
        try:
            ZoneInfo(self.opts["server-time-zone"])
        except (ZoneInfoNotFoundError, ValueError):
            raise self.invalid("server-time-zone", f"server-time-zone '{self.opts['server-time-zone']}' "
                               "is not a known time zone: use an IANA name such as UTC or "
                               "Europe/Berlin") from None
        for key in ("snapshot.split.size", "snapshot.fetch.size", "connect.timeout.ms"):
            if self.opts[key] < 1:
                raise self.invalid(key, f"option '{key}' must be at least 1, got {self.opts[key]}")
        if self.opts["connect.max-retries"] < 0:
            raise self.invalid("connect.max-retries", "option 'connect.max-retries' must be at least 0")

    def _table_names(self) -> tuple[tuple[str, str], ...]:
        names = split_names(self.opts["table-names"])
        refused = pattern_refusal(names, self.opts["table-pattern"])
        if refused:
            raise self.invalid("table-pattern" if self.opts["table-pattern"] is not None else "table-names", refused)
        if not names:
            raise self.invalid("table-names", "table-names is empty: list the tables to capture "
                               "as database.table, e.g. table-names = [\"shop.orders\"]")
        databases = self.opts["database-names"]
        tables = []
        for name in names:
            parts = name.split(".")
            if len(parts) != 2 or not all(parts):
                raise self.invalid("table-names", f"table-names holds '{name}': write each table as "
                                   "database.table, e.g. \"shop.orders\"")
            if databases and parts[0] not in databases:
                raise self.invalid("table-names", f"table '{name}' is in database '{parts[0]}', which "
                                   f"database-names ({', '.join(databases)}) does not list: add it there "
                                   "or remove database-names")
            tables.append((parts[0], parts[1]))
        return tuple(tables)

    def _table_keys(self) -> dict[str, list[str]]:
        keys: dict[str, list[str]] = {}
        known = {f"{db}.{t}" for db, t in self._tables}
        for entry in self.opts["table-names-config"] or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("table"), str):
                raise self.invalid("table-names-config", "each entry of table-names-config must be "
                                   "{ table = \"db.table\", primaryKeys = [\"id\"] }")
            table, primary = entry["table"], entry.get("primaryKeys", [])
            if table not in known:
                raise self.invalid("table-names-config", f"table-names-config names '{table}', which is "
                                   f"not in table-names ({', '.join(sorted(known))})")
            if not isinstance(primary, list) or not all(isinstance(k, str) for k in primary):
                raise self.invalid("table-names-config", f"primaryKeys of '{table}' must be a list of "
                                   "column names, e.g. primaryKeys = [\"id\"]")
            keys[table] = primary
        return keys

    def _check_modes(self) -> None:
        mode = self.opts["startup.mode"]
        if mode == "specific":
            for key in ("startup.specific-offset.file", "startup.specific-offset.pos"):
                if self.opts[key] is None:
                    raise self.invalid(key, f"startup.mode = specific needs {key}: give the binlog "
                                       "file and position to start from (SHOW MASTER STATUS shows them)")
        if self.opts["stop.mode"] != "never":
            raise self.invalid("stop.mode", f"stop.mode = {self.opts['stop.mode']} is not supported: a "
                               "MySQL-CDC stream runs until the job is cancelled (stop.mode = never)")
        if self.opts["format"] != "DEFAULT":
            raise self.invalid("format", "format = COMPATIBLE_DEBEZIUM_JSON is not supported: SeaTide "
                               "emits rows with a row kind (format = DEFAULT)")
        debezium = self.opts["debezium"] or {}
        try:
            self.behaviour = change_behaviour(self.opts, _nested(debezium, "include.schema.changes"))
        except OptionError as exc:
            raise self.invalid(exc.option, exc.message) from None

    def _parse_server_id(self) -> int:
        text = self.opts["server-id"]
        if text is None:
            return random.randint(*SERVER_ID_RANGE)
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(text))
        if not match:
            raise self.invalid("server-id", f"server-id '{text}' is neither a number (5400) nor a "
                               "range (5400-5408)")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if not 1 <= first <= last < 1 << 32:
            raise self.invalid("server-id", f"server-id '{text}': ids must be 1..4294967295 and a "
                               "range must run from low to high")
        # One binlog reader per job: the range's first id is the one used.
        return first

    # -- contract ----------------------------------------------------------------------
    def row_kinds(self) -> frozenset[RowKind]:
        return ALL_KINDS

    def server_config(self) -> ServerConfig:
        return ServerConfig(
            host=self._url.host, port=self._url.port, user=self.opts["username"],
            password=self.opts["password"], tables=self._tables, keys=self._keys,
            server_id=self._server_id, time_zone=self.opts["server-time-zone"],
            connect_timeout_s=self.opts["connect.timeout.ms"] / 1000.0,
            max_retries=self.opts["connect.max-retries"], split_size=self.opts["snapshot.split.size"],
            fetch_size=self.opts["snapshot.fetch.size"])

    # -- schema changes (plugin/evolution.py) ---------------------------------------------------
    def schema_change_behavior(self) -> str:
        return self.behaviour

    def table_shapes(self) -> "dict[str, StructType]":
        return {t.name: self._fields(t) for t in self._read_tables}

    def _as_read(self, tables: list, ctx: ReadContext) -> list:
        """The tables as the stream is at them: a table new to the pipeline as the server describes it
        now; a known one with the shape kept with the checkpoint and, when the query starts again at
        an ALTER TABLE of it (``ctx.seen``), that one statement applied (shapes.py). Never the
        server's own description of a known table: it may be several changes further."""
        if self.behaviour == "exception" or not ctx.known_tables:
            return tables
        from pyspark.sql.types import StructType

        shaped = []
        for table in tables:
            if table.name not in ctx.known_tables:
                shaped.append(table)
                continue
            kept = _kept(table, StructType.fromJson(json.loads(ctx.known_tables[table.name])))
            seen = (ctx.seen or {}).get(table.name)
            shaped.append(kept if seen is None else _changed(kept, seen, table))
        return shaped

    def discover(self, config: ServerConfig, check: bool = True) -> "tuple[list[CapturedTable], StructType]":
        """The captured tables (any number, each of its own shape: one binlog reader reads them
        all) and the source's Spark schema, checked against the server."""
        from pyspark.sql import types as T

        try:
            with config.connect() as conn:
                if check:
                    check_binlog(conn, f"{config.host}:{config.port}")
                # each with the position its description is of: a DDL statement after it is applied from the binlog
                tables = [numbered(*described_at(conn, config, db, t)) for db, t in config.tables]
        except (CatalogError, UnsupportedColumn) as exc:
            raise PermanentError(f"MySQL-CDC: {exc}") from None
        except Exception as exc:  # pymysql's errors: access denied, unknown host, ...
            raise PermanentError(f"MySQL-CDC: cannot read the captured tables from {config.host}:"
                                 f"{config.port} as {config.user}: {exc}") from None
        tables = self._as_read(tables, self._ctx) if self._ctx is not None else tables
        self._read_tables = tables
        if self.multi_table():
            self._layout = TableLayout.of((t.name, self._fields(t)) for t in tables)
            return tables, self._layout.spark_schema(sequenced=True)
        # the stream numbers its rows itself (batches.py): Spark cannot number a stream's rows
        return tables, T.StructType([*self._fields(tables[0]).fields, *hidden_fields(sequenced=True)])

    @staticmethod
    def _fields(table: CapturedTable) -> "StructType":
        from pyspark.sql import types as T

        # each field names its column's type, for a Jdbc sink that creates a MySQL table, and carries
        # its description (its shape kept with the checkpoint: schema evolution)
        charsets = table.charsets or (None,) * len(table.described)
        ids = table.ids or (None,) * len(table.described)
        at = {_DDL_AT: json.dumps(list(table.ddl_at))} if table.ddl_at is not None else {}
        definitions = table.definitions or ((False, None),) * len(table.described)
        return T.StructType([T.StructField(c.name, c.spark_type, True, {
            **source_metadata(MYSQL, c.column_type), _MYSQL: json.dumps([*row[:5], charset]),
            **({COLUMN_ID: i} if i is not None else {}), **at,
            **({SOURCE_NOT_NULL: True} if not_null else {}),
            **({SOURCE_DEFAULT: json.dumps(list(default))} if default is not None else {}),
            **({RETIRED: True} if c.name in table.retired else {})})
            for c, row, charset, i, (not_null, default) in zip(table.columns, table.described, charsets, ids,
                                                               definitions)])

    # -- tables ----------------------------------------------------------------------------
    def multi_table(self) -> bool:
        return len(self._tables) > 1

    def tables(self) -> "list[Schema]":
        """Each captured table as the server describes it (names and configured keys alone when
        the server cannot be reached now: the job is checked again where it runs)."""
        if self._catalog is None:
            config = replace(self.server_config(), connect_timeout_s=min(5.0, self.opts["connect.timeout.ms"] / 1000),
                             max_retries=0)
            try:
                described = self.discover(config, check=False)[0] if servers_asked() else None
            except Exception:  # noqa: BLE001 - unreachable or refused: the read says why, where it runs
                described = None
            if described is None:
                self._catalog = [Schema((), f"{db}.{t}", primary_key=PrimaryKey("PRIMARY", tuple(k))
                                        if (k := self._keys.get(f"{db}.{t}")) else None) for db, t in self._tables]
            else:
                self._catalog = [Schema(tuple(Column(f.name, f.dataType) for f in self._fields(t).fields), t.name,
                                        primary_key=PrimaryKey("PRIMARY", t.key) if t.key else None)
                                 for t in described]
        return self._catalog

    def declared_schema(self) -> "Schema | None":
        return self.tables()[0] if not self.multi_table() else None

    def table_layout(self, ctx: ReadContext) -> TableLayout:
        return self._layout

    def read(self, ctx: ReadContext) -> "DataFrame":
        from seatide.connectors.mysql_cdc.stream import SOURCE_NAME, MySqlCdcDataSource, stream_options

        if not ctx.micro_batch or not ctx.unbounded:
            raise PermanentError("MySQL-CDC reads an endless change stream and runs only in STREAMING "
                                 "jobs: set env { job.mode = \"STREAMING\" }")
        config = self.server_config()
        self._ctx = ctx
        tables, schema = self.discover(config)
        spark = ctx.spark
        use_python_data_source(spark, MySqlCdcDataSource)
        specific = None
        if self.opts["startup.mode"] == "specific":
            specific = BinlogPosition.of(self.opts["startup.specific-offset.file"],
                                         self.opts["startup.specific-offset.pos"])
        options = stream_options(config, tables, schema.json(), self.opts["startup.mode"], specific,
                                 ctx.max_rows_per_batch, self._layout if self.multi_table() else None,
                                 self.behaviour, _legacy_tables(ctx))
        return spark.readStream.format(SOURCE_NAME).options(**options).load()

    def held(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict | None,
             timeout_s: float) -> HeldPosition:
        """How far the checkpoint's binlog position is behind the server, and whether its file is
        gone. The server keeps its binlog by its own expiry whatever the job does: nothing is
        held for the job, but a position older than the server's oldest file cannot be resumed."""
        position = None
        if offset:
            try:
                position = StreamOffset.from_json(offset).position
            except (ValueError, KeyError, TypeError):
                position = None
        if position is None:
            return HeldPosition("binlog", None, state="no binlog position yet")
        config = replace(self.server_config(), connect_timeout_s=max(1.0, timeout_s), max_retries=0)
        with config.connect(read_timeout=max(1, int(timeout_s))) as db, db.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            logs = [(str(row[0]), int(row[1])) for row in cur.fetchall()]
        behind, lost = binlog_behind(position, logs)
        state = "purged" if lost else "behind" if behind is not None else "file not on this server"
        return HeldPosition(str(position), behind, lost=lost, state=state)

    def server_address(self) -> str:
        return f"{self._url.host}:{self._url.port}"

    def position_gone(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict,
                      timeout_s: float) -> str | None:
        """A checkpoint's binlog file purged from the server it came from (another server's is
        the read's to place by GTID: stream.py)."""
        try:
            at = StreamOffset.from_json(offset)
        except (ValueError, KeyError, TypeError):
            return None
        if at.position is None:
            return None
        config = replace(self.server_config(), connect_timeout_s=max(1.0, timeout_s), max_retries=0)
        with config.connect(read_timeout=max(1, int(timeout_s))) as db:
            if at.server is not None and at.server != server_identity(db):
                return None
            files = binlog_files(db)
        return lost_position_message(at.position, files[0] if files else None) if at.position.file not in files else None


def _kept(server: CapturedTable, known: "StructType") -> CapturedTable:
    """The table with the shape kept with the checkpoint (``server``: as described now, for its key)."""
    fields = [f for f in known.fields if _MYSQL in (f.metadata or {})]
    rows = [json.loads(f.metadata[_MYSQL]) for f in fields]
    at = next((json.loads(f.metadata[_DDL_AT]) for f in fields if _DDL_AT in f.metadata), None)
    return numbered(replace(server, described=tuple(tuple(r[:5]) for r in rows), charsets=tuple(r[5] for r in rows),
                            retired=tuple(f.name for f in fields if f.metadata.get(RETIRED)),
                            ids=tuple(f.metadata.get(COLUMN_ID) for f in fields),
                            definitions=tuple((bool(f.metadata.get(SOURCE_NOT_NULL)),
                                               tuple(json.loads(f.metadata[SOURCE_DEFAULT]))
                                               if SOURCE_DEFAULT in f.metadata else None) for f in fields),
                            ddl_at=tuple(at) if at is not None else None), None)


def _changed(kept: CapturedTable, seen: dict, server: CapturedTable) -> CapturedTable:
    """The kept shape after the change the stream stopped at: an ALTER TABLE statement (binlog.py)."""
    if not isinstance(seen, dict) or "ddl" not in seen:
        detail = seen.get("binlog") if isinstance(seen, dict) else seen
        raise PermanentError(
            f"MySQL-CDC: the binlog rows of {kept.name} have other columns than its DDL statements read so far "
            f"give it ({detail}), so their values cannot be matched to columns. This happens when the table was "
            f"altered before the job's start position; {START_OVER}")
    at = tuple(seen["at"])
    try:
        return after_ddl(kept, seen["ddl"], seen.get("schema"), at, server)
    except (UnknownDdl, ShapeError) as exc:
        raise PermanentError(
            f"MySQL-CDC: cannot follow the change of {kept.name} at binlog {at[0]}:{at[1]}: {exc}. The statement: "
            f"{seen['ddl']}. Its columns after it are not known, and reading on would put values in the wrong "
            f"columns; {START_OVER}") from None


def _legacy_tables(ctx: ReadContext) -> list[str] | None:
    """The tables an offset written before offsets named their tables covers: the ones the
    pipeline ran with (its kept shapes, in the order they first appeared); None: today's."""
    return [name for name in (ctx.known_tables or {}) if name.count(".") == 1] or None


def _nested(block: dict, dotted: str):
    if dotted in block:
        return block[dotted]
    value = block
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


__all__ = ["MySqlCdcSource"]
