"""Postgres-CDC: snapshot PostgreSQL tables, then stream their changes (SeaTunnel's options).

Changes come from logical decoding with the built-in ``pgoutput`` plugin through a
replication slot SeaTide creates for the job (see ``slot`` for the naming rule) and drops
in ``release`` when the job is gone for good. Rows carry their kind in ``__row_kind``:
snapshot rows are INSERTs; changes are INSERT, UPDATE_BEFORE (when the old row is known),
UPDATE_AFTER and DELETE.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from seatide.connectors.jdbc.url import POSTGRESQL, JdbcUrl, JdbcUrlError
from seatide.connectors.postgres_cdc import ownership, slot
from seatide.connectors.postgres_cdc.options import PG_CDC_OPTIONS, UNSUPPORTED
from seatide.connectors.cdc_tables import pattern_refusal, split_names
from seatide.connectors.cdc_evolution import change_behaviour
from seatide.connectors.postgres_cdc.shapes import ShapeError, catalog_columns, relation_ids
from seatide.connectors.postgres_cdc.tables import TableColumn, TableError, columns_of_relation, describe, split_name
from seatide.plugin.base import BatchOffsets, HeldPosition, PermanentError, ReadContext, Source, use_python_data_source
from seatide.plugin.evolution import COLUMN_ID, RETIRED, live_fields
from seatide.plugin.options import OptionError
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, RowKind, hidden_fields
from seatide.plugin.schema import Column, OldRowColumns, PrimaryKey, Schema
from seatide.plugin.tables import TableLayout, TableRows
from seatide.plugin.unasked import servers_asked

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")
# Reading the tables' catalog when a job is loaded (its sinks' placeholders) waits this long at
# most for the server: a submission is not held by an unreachable one (the driver reads again).
_LOAD_TIMEOUT_S = 5
_PG = "seatide.postgres_column"     # field metadata: the column as the stream reads it (TableColumn)


@register
class PostgresCdcSource(Source):
    """Reads a consistent snapshot of the tables, then every change committed after it."""

    plugin_name = "Postgres-CDC"
    options = PG_CDC_OPTIONS
    doc = __doc__ or ""
    # Tables added to a stopped job are snapshotted on their own when it resumes (stream.py)
    table_list_options = ("table-names", "table-names-config")

    # -- validation ----------------------------------------------------------------------
    def check(self) -> None:
        try:
            self.url = JdbcUrl.parse(self.opts["base-url"])
        except JdbcUrlError as exc:
            raise self.invalid("base-url", str(exc)) from None
        if self.url.dialect != POSTGRESQL:
            raise self.invalid("base-url", f"base-url '{self.url.text}' is not a PostgreSQL URL: "
                               "write jdbc:postgresql://host:5432/database")
        plugin = self.opts["decoding.plugin.name"]
        if plugin.strip().lower() != "pgoutput":
            # The rows are the same whatever decodes them; pgoutput needs no plug-in on the server.
            self.notice("decoding.plugin.name", f"decoding.plugin.name = \"{plugin}\": SeaTide reads changes "
                        "with pgoutput, which PostgreSQL 10+ has built in (no plug-in to install); the job's "
                        "rows are the same")
        mode = self.opts["startup.mode"]
        if mode not in ("initial", "latest"):
            raise self.invalid("startup.mode", f"startup.mode = \"{mode}\" is not supported: a replication "
                               "slot starts where it is created, so use \"initial\" (snapshot, then "
                               "changes) or \"latest\" (changes from now on)")
        debezium = self.opts["debezium"] or {}
        for key, why in UNSUPPORTED.items():
            allowed = (key == "format" and self.opts[key] is not None and self.opts[key].upper() == "DEFAULT") or \
                (key == "debezium" and set(_flat(debezium)) <= {"include.schema.changes"})
            if self.opts[key] is not None and not allowed:
                raise self.invalid(key, f"option '{key}' is not supported: {why}; remove it")
        try:
            self.behaviour = change_behaviour(self.opts, _flat(debezium).get("include.schema.changes"))
        except OptionError as exc:
            raise self.invalid(exc.option, exc.message) from None
        for key in ("startup.specific-offset.file", "startup.specific-offset.pos", "startup.timestamp"):
            if self.opts[key] is not None:
                raise self.invalid(key, f"option '{key}' is not supported: startup.mode is initial or latest")
        for key in ("snapshot.split.size", "snapshot.fetch.size", "connect.timeout.ms", "slot.active-timeout.ms"):
            if self.opts[key] < 1:
                raise self.invalid(key, f"option '{key}' must be at least 1, got {self.opts[key]}")
        name = self.opts["slot.name"]
        if name is not None and not _SLOT_NAME.fullmatch(name):
            raise self.invalid("slot.name", f"slot.name \"{name}\" is not a valid slot name: use 1 to 63 "
                               "lower-case letters, digits and underscores")
        self.database, self.table_names = self._tables()
        self.keys = self._configured_keys()
        self._catalog: list | None = None       # tables(), asked of the server once
        self._layout: TableLayout | None = None

    def _tables(self) -> tuple[str, list[tuple[str, str]]]:
        databases = self.opts["database-names"] or []
        if len(databases) > 1:
            raise self.invalid("database-names", f"database-names lists {databases}: a replication slot "
                               "reads one database, so use one Postgres-CDC source per database")
        default_db = (databases or [self.url.database or "postgres"])[0]
        default_schema = (self.opts["schema-names"] or ["public"])[0]
        names = []
        refused = pattern_refusal(split_names(self.opts["table-names"]), self.opts["table-pattern"])
        if refused:
            raise self.invalid("table-pattern" if self.opts["table-pattern"] is not None else "table-names", refused)
        for text in split_names(self.opts["table-names"]):
            try:
                database, schema, table = split_name(text, default_db, default_schema)
            except TableError as exc:
                raise self.invalid("table-names", str(exc)) from None
            if database != default_db:
                raise self.invalid("table-names", f"table '{text}' is in database {database}, but this "
                                   f"source reads {default_db}: one source reads one database")
            names.append((schema, table))
        if not names:
            raise self.invalid("table-names", "table-names is empty: list at least one database.schema.table")
        return default_db, names

    def _configured_keys(self) -> dict[tuple[str, str], list[str]]:
        keys = {}
        for entry in self.opts["table-names-config"] or []:
            if not isinstance(entry, dict) or "table" not in entry:
                raise self.invalid("table-names-config", "each table-names-config entry needs "
                                   "table = \"db.schema.table\" (and primaryKeys = [...])")
            _, schema, table = split_name(str(entry["table"]), self.database,
                                          (self.opts["schema-names"] or ["public"])[0])
            primary = entry.get("primaryKeys") or []
            if not isinstance(primary, list) or not all(isinstance(k, str) for k in primary):
                raise self.invalid("table-names-config", f"primaryKeys of {entry['table']} must be a list "
                                   "of column names")
            keys[(schema, table)] = primary
        return keys

    # -- contract ------------------------------------------------------------------------
    def row_kinds(self) -> frozenset[RowKind]:
        return ALL_KINDS

    def connect(self, timeout_s: float | None = None, bounded: bool = False):
        """``bounded``: each statement too ends within ``timeout_s`` (the leader's asks, inside its tick)."""
        timeout = max(1, self.opts["connect.timeout.ms"] // 1000)
        extra = {"options": f"-c statement_timeout={max(1, int(timeout_s * 1000))}"} if bounded else {}
        return self.url.connect(self.opts["username"], self.opts["password"], autocommit=True, database=self.database,
                                connect_timeout=min(timeout, max(1, int(timeout_s or timeout))), **extra)

    def slot_name(self, ctx: ReadContext) -> str:
        return self.opts["slot.name"] or slot.default_name(ctx.job_id, ctx.pipeline_id, ctx.plugin_id)

    # -- tables ----------------------------------------------------------------------------
    def multi_table(self) -> bool:
        return len(self.table_names) > 1

    def _name(self, schema: str, table: str) -> str:
        return f"{self.database}.{schema}.{table}"

    def tables(self) -> "list[Schema]":
        """Each captured table as the server describes it (names and configured keys alone when
        the server cannot be reached now: the job is checked again where it runs)."""
        if self._catalog is None:
            try:
                described = self._describe(check_wal=False, timeout_s=_LOAD_TIMEOUT_S) if servers_asked() else None
            except Exception:  # noqa: BLE001 - unreachable or refused: the read says why, where it runs
                described = None
            if described is None:
                self._catalog = [Schema((), self._name(sc, t), primary_key=PrimaryKey("pk", tuple(k))
                                        if (k := self.keys.get((sc, t))) else None) for sc, t in self.table_names]
            else:
                self._catalog = [self._schema_of(t) for t in described]
        return self._catalog

    def declared_schema(self) -> "Schema | None":
        return self.tables()[0] if not self.multi_table() else None

    def _schema_of(self, table) -> "Schema":
        struct = self._fields(table)
        columns = tuple(Column(f.name, f.dataType) for f in struct.fields)
        key = PrimaryKey(f"pk_{table.name}", table.keys) if table.keys else None
        # Under REPLICA IDENTITY DEFAULT or USING INDEX a DELETE logs only the identity's columns.
        old_row = None if table.identity == "full" else OldRowColumns(
            table.identity_key, f"run ALTER TABLE {table.schema}.{table.name} REPLICA IDENTITY FULL so that "
            "PostgreSQL logs every column of the old row")
        return Schema(columns, self._name(table.schema, table.name), primary_key=key, old_row=old_row)

    def table_layout(self, ctx: ReadContext) -> TableLayout:
        return self._layout

    def batch_rows(self, batch: "DataFrame", ctx: ReadContext, offsets: BatchOffsets | None = None) -> TableRows:
        """The tagged rows, with what the plan of a batch of changes knew of its bytes (the runtime
        measures the others before it collects them on the driver)."""
        end = offsets.end if offsets is not None else {}
        size, changes = end.get("bytes"), end.get("changes")
        return TableRows(batch, bytes=None if end.get("lookups") else size, least_bytes=size or 0,
                         row_bytes=size // changes if size and changes else None)

    def batch_bound(self, end: dict) -> tuple[int, int] | None:
        """A change batch's rows at most and bytes, as planned; None for a snapshot, a backfill, or lookups."""
        unknown = any(end.get(k) for k in ("lookups", "splits", "snapshot", "backfill"))
        changes, size = end.get("changes"), end.get("bytes")
        return None if unknown or changes is None or size is None else (int(changes), int(size))

    # -- schema changes (plugin/evolution.py) ---------------------------------------------------
    def schema_change_behavior(self) -> str:
        return self.behaviour

    def table_shapes(self) -> "dict[str, StructType]":
        return {self._name(t.schema, t.name): self._fields(t) for t in self._read_tables}

    def _as_read(self, tables: list, ctx: ReadContext) -> list:
        """The tables with the columns the stream is at, which the server's description may be ahead
        of: the shape the pipeline last ran with (kept with its checkpoint), or the one a Relation
        message of the stream showed (``ctx.seen``), with the columns dropped since kept as retired."""
        if self.behaviour == "exception":
            return tables
        shaped = []
        with self.connect() as conn:
            for table in tables:
                name = self._name(table.schema, table.name)
                known = _shape(ctx.known_tables, name)
                columns = list(table.columns)
                if ctx.seen and name in ctx.seen:
                    columns = self._relation_columns(conn, table, ctx.seen[name], known)
                elif known is not None:
                    columns = [_column(f) for f in live_fields(known)]
                if known is not None:
                    live, ids = {c.name for c in columns}, {c.attnum for c in columns}
                    # a column renamed from keeps its values for rows from before, not its id
                    columns += [replace(c, retired=True, attnum=None if c.attnum in ids else c.attnum)
                                for c in map(_column, known.fields) if c.name not in live]
                shaped.append(replace(table, columns=tuple(columns)))
        return shaped

    @staticmethod
    def _relation_columns(conn, table, relation: list[list], known) -> list[TableColumn]:
        """The columns a Relation message showed, with their attnums (shapes.py)."""
        kept = None if known is None else [(c.name, c.type_oid, c.typmod, c.attnum)
                                            for c in map(_column, live_fields(known))]
        regclass = table.ident().as_string(conn)
        catalog = catalog_columns(conn, regclass)
        try:
            ids = relation_ids(table.qualified, relation, catalog, kept)
        except ShapeError as exc:
            raise TableError(str(exc)) from None
        return columns_of_relation(conn, table.qualified, relation, ids, regclass)

    def read(self, ctx: ReadContext) -> "DataFrame":
        if not ctx.unbounded:
            raise PermanentError("Postgres-CDC reads an unbounded stream of changes and supports only "
                                 "STREAMING jobs: set env { job.mode = \"STREAMING\" } (use the Jdbc "
                                 "source for a one-off copy of a table)")
        try:
            tables = self._as_read(self._describe(), ctx)
        except TableError as exc:
            raise PermanentError(f"Postgres-CDC: {exc}") from None
        self._read_tables = tables
        if self.multi_table():
            # one slot, one stream: each row tagged by its table (plugin.tables)
            self._layout = TableLayout.of((self._name(t.schema, t.name), self._fields(t)) for t in tables)
            schema = self._layout.spark_schema(sequenced=True)
        else:
            schema = self._spark_schema(tables[0])
        config = {
            "host": self.url.host, "port": self.url.port, "database": self.database,
            "user": self.opts["username"], "password": self.opts["password"],
            "connect_timeout_ms": self.opts["connect.timeout.ms"], "time_zone": self.opts["server-time-zone"],
            "tables": [t.to_json() for t in tables],
            "slot": self.slot_name(ctx), "slot_given": bool(self.opts["slot.name"]),
            "startup_mode": self.opts["startup.mode"], "job_id": ctx.job_id,
            "active_timeout_ms": self.opts["slot.active-timeout.ms"],
            "split_size": self.opts["snapshot.split.size"], "fetch_size": self.opts["snapshot.fetch.size"],
            "max_rows": ctx.max_rows_per_batch,
            "layout": self._layout.to_json() if self.multi_table() else None,
            "schema_changes": self.behaviour, "infinity": self.opts["infinity.handling"],
            "legacy_tables": self._legacy_tables(ctx),
        }
        spark = ctx.spark
        config["spark_time_zone"] = spark.conf.get("spark.sql.session.timeZone")
        if any(c.seatunnel == "time" for t in tables for c in t.columns):
            spark.conf.set("spark.sql.timeType.enabled", "true")   # Spark 4.3 keeps TIME behind a flag
        from seatide.connectors.postgres_cdc.stream import SOURCE_NAME, PostgresCdcSource as Stream

        use_python_data_source(spark, Stream)
        return spark.readStream.format(SOURCE_NAME).schema(schema).option("config", json.dumps(config)).load()

    def _legacy_tables(self, ctx: ReadContext) -> list[str] | None:
        """The tables an offset written before offsets named their tables covers: the ones the
        pipeline ran with (its kept shapes, in the order they first appeared); None: today's."""
        prefix = f"{self.database}."
        known = [name[len(prefix):] for name in (ctx.known_tables or {}) if name.startswith(prefix)]
        return known or None

    def _describe(self, check_wal: bool = True, timeout_s: int | None = None) -> list:
        """The captured tables as the server has them now (any number, each of its own shape:
        one slot decodes them all)."""
        try:
            with self.connect(timeout_s) as conn:
                level = conn.execute("SHOW wal_level").fetchone()[0]
                if check_wal and level != "logical":
                    raise PermanentError(
                        f"Postgres-CDC needs wal_level = logical on {self.url.host}:{self.url.port}, which "
                        f"has wal_level = {level}: run ALTER SYSTEM SET wal_level = logical and restart "
                        "the server (and allow replication slots: max_replication_slots >= 1)")
                return [describe(conn, schema, name, self.keys.get((schema, name)))
                        for schema, name in self.table_names]
        except TableError as exc:
            raise PermanentError(f"Postgres-CDC: {exc}") from None

    @staticmethod
    def _fields(table):
        from pyspark.sql import types as T

        from seatide.plugin.types import SOURCE_DEFAULT, SOURCE_NOT_NULL, parse_type, source_metadata

        # each field names its column's type, for a Jdbc sink that creates a PostgreSQL table, and
        # carries what the stream needs to read it again (its shape kept with the checkpoint)
        return T.StructType([T.StructField(c.name, parse_type(c.seatunnel), True,
                                           {**source_metadata(POSTGRESQL, c.declared), _PG: json.dumps(c.to_json()),
                                            **({RETIRED: True} if c.retired else {}),
                                            **({SOURCE_NOT_NULL: True} if c.not_null else {}),
                                            **({SOURCE_DEFAULT: json.dumps(c.default)} if c.default else {}),
                                            **({COLUMN_ID: c.attnum} if c.attnum is not None else {})})
                             for c in table.columns])

    @classmethod
    def _spark_schema(cls, table):
        from pyspark.sql import types as T

        # the stream numbers its rows itself (row_batches.py): Spark cannot number a stream's rows
        return T.StructType([*cls._fields(table).fields, *hidden_fields(sequenced=True)])

    def held(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict | None,
             timeout_s: float) -> HeldPosition:
        """The WAL the source's replication slot keeps on the server (``pg_replication_slots``)."""
        name = self.opts["slot.name"] or slot.default_name(job_id, pipeline_id, plugin_id)
        with self.connect(timeout_s, bounded=True) as conn:
            return slot.measured(conn, name) or HeldPosition(name, None, state="no slot")

    def still_left(self, name: str, within_s: float = 5.0) -> HeldPosition | None:
        """What slot.name ``name``, left by a release, keeps now (``slot.still_left``)."""
        with self.connect(within_s, bounded=True) as conn:
            return slot.still_left(conn, name)

    def position_gone(self, job_id: str, pipeline_id: int, plugin_id: str, offset: dict,
                      timeout_s: float) -> str | None:
        """A checkpoint's LSN whose slot was dropped, or lost its WAL (a slot that only moved on
        past it is left to the read, which has Spark's own offsets to compare). A slot.name whose mark
        names nobody is marked as the run's here when the checkpoint has read through it (ownership.claim):
        a resume --fallback fresh may then replace it."""
        if offset.get("lsn") is None:      # no slot made yet: a start creates it
            return None
        name = self.opts["slot.name"] or slot.default_name(job_id, pipeline_id, plugin_id)
        with self.connect(timeout_s, bounded=True) as conn:
            if self.opts["slot.name"]:      # a mark naming nobody is the run's when this checkpoint read through it
                ownership.claim(conn, name, job_id, offset["lsn"])
            why = slot.gone(conn, name)
        return slot.lost_position_message(name, offset["lsn"], why) if why is not None else None

    def server_address(self) -> str:
        return f"{self.url.host}:{self.url.port}"

    def shared_names(self) -> tuple[str, ...]:
        return (self.opts["slot.name"],) if self.opts["slot.name"] else ()

    def release(self, job_id: str, keep: frozenset[str] = frozenset(), within_s: float = 10.0) -> tuple:
        """Drop the run's slots and publications (``slot.release_run``); nothing to do when they are
        already gone. The whole release
        answers within about ``within_s``: a slot a walsender still holds then is left, with
        ``ObjectInUse`` naming the holder (the leader records it and tries again later). A slot.name
        whose owner it cannot tell is left, and returned (``LeftBehind``), for the operator to settle."""
        deadline = time.monotonic() + within_s
        with self.connect(within_s, bounded=True) as conn:
            return tuple(slot.release_run(conn, job_id, self.opts["slot.name"], keep, deadline))


def _shape(known: dict | None, name: str):
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(known[name])) if known and name in known else None


def _column(field) -> TableColumn:
    return TableColumn(*json.loads(field.metadata[_PG]))


def _flat(block: dict, prefix: str = "") -> dict:
    """A nested option block's leaves by dotted path ({include: {schema.changes: true}} and
    {include.schema.changes: true} alike)."""
    flat = {}
    for key, value in (block or {}).items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


__all__ = ["PostgresCdcSource"]
