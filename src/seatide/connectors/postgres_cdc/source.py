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
from typing import TYPE_CHECKING

from seatide.connectors.jdbc.url import POSTGRESQL, JdbcUrl, JdbcUrlError
from seatide.connectors.postgres_cdc import slot
from seatide.connectors.postgres_cdc.options import PG_CDC_OPTIONS, UNSUPPORTED
from seatide.connectors.postgres_cdc.tables import TableError, describe, split_name
from seatide.plugin.base import PermanentError, ReadContext, Source, use_python_data_source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, ROW_KIND_COLUMN, RowKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


@register
class PostgresCdcSource(Source):
    """Reads a consistent snapshot of the tables, then every change committed after it."""

    plugin_name = "Postgres-CDC"
    options = PG_CDC_OPTIONS
    doc = __doc__ or ""

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
        for key, why in UNSUPPORTED.items():
            if self.opts[key] is not None and not (key == "format" and self.opts[key].upper() == "DEFAULT"):
                raise self.invalid(key, f"option '{key}' is not supported: {why}; remove it")
        for key in ("startup.specific-offset.file", "startup.specific-offset.pos", "startup.timestamp"):
            if self.opts[key] is not None:
                raise self.invalid(key, f"option '{key}' is not supported: startup.mode is initial or latest")
        for key in ("snapshot.split.size", "snapshot.fetch.size", "connect.timeout.ms"):
            if self.opts[key] < 1:
                raise self.invalid(key, f"option '{key}' must be at least 1, got {self.opts[key]}")
        name = self.opts["slot.name"]
        if name is not None and not _SLOT_NAME.fullmatch(name):
            raise self.invalid("slot.name", f"slot.name \"{name}\" is not a valid slot name: use 1 to 63 "
                               "lower-case letters, digits and underscores")
        self.database, self.table_names = self._tables()
        self.keys = self._configured_keys()

    def _tables(self) -> tuple[str, list[tuple[str, str]]]:
        databases = self.opts["database-names"] or []
        if len(databases) > 1:
            raise self.invalid("database-names", f"database-names lists {databases}: a replication slot "
                               "reads one database, so use one Postgres-CDC source per database")
        default_db = (databases or [self.url.database or "postgres"])[0]
        default_schema = (self.opts["schema-names"] or ["public"])[0]
        names = []
        for text in self.opts["table-names"]:
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

    def connect(self):
        return self.url.connect(self.opts["username"], self.opts["password"], autocommit=True,
                                database=self.database,
                                connect_timeout=max(1, self.opts["connect.timeout.ms"] // 1000))

    def slot_name(self, ctx: ReadContext) -> str:
        return self.opts["slot.name"] or slot.default_name(ctx.job_id, ctx.pipeline_id, ctx.plugin_id)

    def read(self, ctx: ReadContext) -> "DataFrame":
        if not ctx.unbounded:
            raise PermanentError("Postgres-CDC reads an unbounded stream of changes and supports only "
                                 "STREAMING jobs: set env { job.mode = \"STREAMING\" } (use the Jdbc "
                                 "source for a one-off copy of a table)")
        tables = self._describe()
        schema = self._spark_schema(tables[0])
        config = {
            "host": self.url.host, "port": self.url.port, "database": self.database,
            "user": self.opts["username"], "password": self.opts["password"],
            "connect_timeout_ms": self.opts["connect.timeout.ms"], "time_zone": self.opts["server-time-zone"],
            "tables": [t.to_json() for t in tables], "columns": [c.name for c in tables[0].columns],
            "slot": self.slot_name(ctx), "startup_mode": self.opts["startup.mode"],
            "split_size": self.opts["snapshot.split.size"], "fetch_size": self.opts["snapshot.fetch.size"],
            "max_rows": ctx.max_rows_per_batch,
        }
        spark = ctx.spark
        config["spark_time_zone"] = spark.conf.get("spark.sql.session.timeZone")
        if any(c.seatunnel == "time" for c in tables[0].columns):
            spark.conf.set("spark.sql.timeType.enabled", "true")   # Spark 4.3 keeps TIME behind a flag
        from seatide.connectors.postgres_cdc.stream import SOURCE_NAME, PostgresCdcSource as Stream

        use_python_data_source(spark, Stream)
        return spark.readStream.format(SOURCE_NAME).schema(schema).option("config", json.dumps(config)).load()

    def _describe(self) -> list:
        try:
            with self.connect() as conn:
                level = conn.execute("SHOW wal_level").fetchone()[0]
                if level != "logical":
                    raise PermanentError(
                        f"Postgres-CDC needs wal_level = logical on {self.url.host}:{self.url.port}, which "
                        f"has wal_level = {level}: run ALTER SYSTEM SET wal_level = logical and restart "
                        "the server (and allow replication slots: max_replication_slots >= 1)")
                tables = [describe(conn, schema, name, self.keys.get((schema, name)))
                          for schema, name in self.table_names]
        except TableError as exc:
            raise PermanentError(f"Postgres-CDC: {exc}") from None
        first = tables[0]
        for other in tables[1:]:
            if [(c.name, c.seatunnel) for c in other.columns] != [(c.name, c.seatunnel) for c in first.columns]:
                raise PermanentError(
                    f"Postgres-CDC: tables {first.qualified} and {other.qualified} have different columns; "
                    "one source emits one row type, so read them with one Postgres-CDC source each")
        return tables

    @staticmethod
    def _spark_schema(table):
        from pyspark.sql import types as T

        from seatide.connectors.jdbc.url import POSTGRESQL
        from seatide.plugin.types import parse_type, source_metadata

        # each field names its column's type, for a Jdbc sink that creates a PostgreSQL table
        fields = [T.StructField(c.name, parse_type(c.seatunnel), True, source_metadata(POSTGRESQL, c.declared))
                  for c in table.columns]
        return T.StructType([*fields, T.StructField(ROW_KIND_COLUMN, T.ByteType(), True)])

    def release(self, job_id: str) -> None:
        """Drop the job's slot and publication; nothing to do when they are already gone."""
        with self.connect() as conn:
            names = [self.opts["slot.name"]] if self.opts["slot.name"] else slot.names_of_job(conn, job_id)
            for name in names:
                slot.drop(conn, name)


__all__ = ["PostgresCdcSource"]
