"""Iceberg source: SeaTunnel's ``Iceberg`` source options over a hadoop, JDBC or REST catalog.

* BATCH without checkpoints: the chosen snapshot (``use_snapshot_id``,
  ``use_snapshot_timestamp``, else the current one) is planned from its manifests and its data
  files read by Spark's own parquet reader, delete files (merge-on-read: equality and position
  deletes, by SeaTide, Flink or SeaTunnel) applied by Spark (``deletes``); with ``start_snapshot_id``/``start_snapshot_timestamp``
  (and ``end_snapshot_id``) the files appended after the start up to the end.
* With micro-batches (STREAMING, or BATCH with ``checkpoint.interval``): the table's history is
  read in order from the ``stream_scan_strategy``'s start; the checkpointed position is a
  snapshot id (and how many of its files were read), see ``positions``. STREAMING keeps
  polling for new snapshots; BATCH ends at the snapshot current when the job started, and
  without a strategy given starts where a BATCH read without checkpoints does.
"""

from __future__ import annotations

from seatide.connectors.iceberg.catalogs import CatalogConfigError, check_config, flat_properties, load_catalog
from seatide.plugin.base import PermanentError, ReadContext, Source, use_python_data_source
from seatide.plugin.options import BOOL, INT, OBJECT, REQUIRED, STRING, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.schema import Schema, read_schema, schema_options

STRATEGIES = ("TABLE_SCAN_THEN_INCREMENTAL", "FROM_LATEST_SNAPSHOT", "FROM_EARLIEST_SNAPSHOT", "FROM_SNAPSHOT_ID",
              "FROM_SNAPSHOT_TIMESTAMP")


class IcebergSourceError(PermanentError):
    pass


@register
class IcebergSource(Source):
    plugin_name = "Iceberg"
    options = (
        Option("catalog_name", STRING, "default", "the catalog's name (the JDBC catalog's catalog_name column)"),
        Option("namespace", STRING, "default", "the namespace (database) of the table"),
        Option("table", STRING, REQUIRED, "the table's name in the namespace"),
        Option("iceberg.catalog.config", OBJECT, REQUIRED, "the catalog (as the Iceberg sink's)"),
        Option("hadoop.config", OBJECT, None, "accepted; no Hadoop setting applies (a warning says so)"),
        Option("iceberg.hadoop-conf-path", STRING, None, "accepted; no Hadoop file is read (a warning says so)"),
        *schema_options(),
        Option("case_sensitive", BOOL, False, "match schema fields to the table's columns with case"),
        Option("start_snapshot_timestamp", INT, None, "read what was appended after the snapshot current at this "
               "time (ms since the epoch); streaming: FROM_SNAPSHOT_TIMESTAMP's start (inclusive)"),
        Option("start_snapshot_id", INT, None, "read what was appended after this snapshot (exclusive); "
               "streaming: FROM_SNAPSHOT_ID's start (inclusive)"),
        Option("end_snapshot_id", INT, None, "with a start: read appends up to this snapshot (inclusive)"),
        Option("use_snapshot_id", INT, None, "read the table as of this snapshot"),
        Option("use_snapshot_timestamp", INT, None, "read the table as of the snapshot current at this time (ms)"),
        Option("stream_scan_strategy", enum(*STRATEGIES), "FROM_LATEST_SNAPSHOT",
               "where a micro-batch read starts: " + ", ".join(STRATEGIES)),
        Option("increment.scan-interval", INT, 2000, "accepted; STREAMING polls at the job's trigger interval"),
    )

    def check(self) -> None:
        try:
            check_config(flat_properties(self.opts["iceberg.catalog.config"]))
        except CatalogConfigError as exc:
            raise self.invalid("iceberg.catalog.config", str(exc)) from None
        opts = self.opts
        if opts["use_snapshot_id"] is not None and opts["use_snapshot_timestamp"] is not None:
            raise self.invalid("use_snapshot_id", "give use_snapshot_id or use_snapshot_timestamp, not both")
        if opts["end_snapshot_id"] is not None and opts["start_snapshot_id"] is None \
                and opts["start_snapshot_timestamp"] is None:
            raise self.invalid("end_snapshot_id", "end_snapshot_id needs start_snapshot_id or start_snapshot_timestamp")
        strategy = opts["stream_scan_strategy"]
        if strategy == "FROM_SNAPSHOT_ID" and opts["start_snapshot_id"] is None:
            raise self.invalid("start_snapshot_id", "stream_scan_strategy = FROM_SNAPSHOT_ID needs start_snapshot_id")
        if strategy == "FROM_SNAPSHOT_TIMESTAMP" and opts["start_snapshot_timestamp"] is None:
            raise self.invalid("start_snapshot_timestamp",
                               "stream_scan_strategy = FROM_SNAPSHOT_TIMESTAMP needs start_snapshot_timestamp")
        for key in ("hadoop.config", "iceberg.hadoop-conf-path"):
            if opts.given(key):
                self.notice(key, f"option '{key}' is ignored: SeaTide reads Iceberg tables through pyiceberg and "
                                 "Spark on the local filesystem, without Hadoop's configuration")
        self._declared = read_schema(opts, check_keys=self.check_keys)

    def declared_schema(self) -> Schema | None:
        return self._declared

    # -- the table ----------------------------------------------------------------------
    def _table(self):
        from pyiceberg.exceptions import NoSuchTableError

        catalog = load_catalog(self.opts["catalog_name"], flat_properties(self.opts["iceberg.catalog.config"]))
        try:
            return catalog.load_table((self.opts["namespace"], self.opts["table"]))
        except NoSuchTableError as exc:
            raise IcebergSourceError(f"Iceberg source: table {self.opts['namespace']}.{self.opts['table']} does not "
                                     f"exist ({exc})") from None

    def _struct(self, table):
        from pyspark.sql.types import StructType

        from seatide.connectors.iceberg.schema import UnsupportedIcebergType, spark_struct

        try:
            struct = spark_struct(table.metadata.schema())
        except UnsupportedIcebergType as exc:
            raise IcebergSourceError(f"Iceberg source: {exc}") from None
        if self._declared is None:
            return struct
        case = self.opts["case_sensitive"]
        by_name = {(f.name if case else f.name.lower()): f for f in struct.fields}
        picked = []
        for field in self._declared.struct.fields:
            found = by_name.get(field.name if case else field.name.lower())
            if found is None:
                raise IcebergSourceError(f"Iceberg source: schema names field {field.name}, which table "
                                         f"{self.opts['namespace']}.{self.opts['table']} does not have "
                                         f"(columns: {', '.join(struct.names)})")
            picked.append(found)
        return StructType(picked)

    def _snapshot_at(self, table, timestamp_ms: int):
        found = None
        for entry in table.metadata.snapshot_log:
            if entry.timestamp_ms <= timestamp_ms:
                found = entry.snapshot_id
        if found is None:
            raise IcebergSourceError(f"Iceberg source: the table has no snapshot at or before {timestamp_ms} ms")
        return found

    def _use_snapshot(self, table) -> int | None:
        opts = self.opts
        if opts["use_snapshot_id"] is not None:
            if table.metadata.snapshot_by_id(opts["use_snapshot_id"]) is None:
                raise IcebergSourceError(f"Iceberg source: use_snapshot_id {opts['use_snapshot_id']} is not a snapshot "
                                         "of the table (expired?)")
            return opts["use_snapshot_id"]
        if opts["use_snapshot_timestamp"] is not None:
            return self._snapshot_at(table, opts["use_snapshot_timestamp"])
        current = table.metadata.current_snapshot()
        return current.snapshot_id if current is not None else None

    def _incremental_start(self, table) -> int | None:
        """The exclusive start of a BATCH incremental read (None: no incremental options)."""
        opts = self.opts
        if opts["start_snapshot_id"] is not None:
            return opts["start_snapshot_id"]
        if opts["start_snapshot_timestamp"] is not None:
            return self._snapshot_at(table, opts["start_snapshot_timestamp"])
        return None

    def _stream_start(self, table, bounded: bool) -> dict:
        from seatide.connectors.iceberg.positions import DONE, position

        opts, metadata = self.opts, table.metadata
        strategy = opts["stream_scan_strategy"]
        if bounded and not opts.given("stream_scan_strategy"):
            # The default strategy (FROM_LATEST_SNAPSHOT) is a stream's: a BATCH job reads what it
            # reads without checkpoints, checkpointed or not (tests/contract/test_sources.py): the
            # appends after a start snapshot (exclusive), else the table as of its snapshot.
            start = self._incremental_start(table)
            if start is not None:
                return position(start, DONE)
            strategy = "TABLE_SCAN_THEN_INCREMENTAL"
        current = metadata.current_snapshot()
        if strategy == "TABLE_SCAN_THEN_INCREMENTAL" or (opts["use_snapshot_id"] is not None
                                                        or opts["use_snapshot_timestamp"] is not None):
            base = self._use_snapshot(table)
            return position(base, 0, True) if base is not None else position(None, -1)
        if strategy == "FROM_EARLIEST_SNAPSHOT" or current is None:
            return position(None, -1)
        first = {"FROM_LATEST_SNAPSHOT": current.snapshot_id,
                 "FROM_SNAPSHOT_ID": opts["start_snapshot_id"],
                 "FROM_SNAPSHOT_TIMESTAMP": (self._snapshot_at(table, opts["start_snapshot_timestamp"])
                                             if opts["start_snapshot_timestamp"] is not None else None)}[strategy]
        snapshot = metadata.snapshot_by_id(first)
        if snapshot is None:
            raise IcebergSourceError(f"Iceberg source: snapshot {first} is not in the table")
        parent = snapshot.parent_snapshot_id
        return position(parent, DONE) if parent is not None else position(None, -1)

    # -- reading ------------------------------------------------------------------------
    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F

        table = self._table()
        struct = self._struct(table)
        if ctx.micro_batch:
            df = self._stream(ctx, table, struct)
        else:
            df = self._batch(ctx, table, struct)
        return df.withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))

    def _batch(self, ctx: ReadContext, table, struct):
        from seatide.connectors.iceberg.datafiles import local_path
        from seatide.connectors.iceberg.positions import DONE, HistoryError, advance, between, position

        start = self._incremental_start(table)
        try:
            if start is not None:
                end = self.opts["end_snapshot_id"]
                head = end if end is not None else (table.metadata.current_snapshot().snapshot_id
                                                    if table.metadata.current_snapshot() else None)
                begin = position(start, DONE)
                files = [u.path for u in between(table, begin, advance(table, begin, head, None))]
            else:      # the snapshot's rows, its delete files (merge-on-read) applied by Spark
                from seatide.connectors.iceberg.deletes import read_snapshot

                return read_snapshot(ctx.spark, table, self._use_snapshot(table), struct)
        except HistoryError as exc:
            raise IcebergSourceError(f"Iceberg source: {exc}") from None
        if not files:
            return ctx.spark.createDataFrame([], struct)
        return ctx.spark.read.schema(struct).parquet(*["file://" + local_path(p) for p in files])

    def _stream(self, ctx: ReadContext, table, struct):
        from seatide.connectors.iceberg.snapshot_stream import IcebergSnapshotSource, SOURCE_NAME, stream_options

        from seatide.connectors.iceberg.positions import HistoryError, units

        initial = self._stream_start(table, bounded=not ctx.unbounded)
        if initial["scan"] and initial["snapshot"] is not None:
            try:       # refused now, naming the table, rather than in the stream's first batch
                units(table, initial["snapshot"], True)
            except HistoryError as exc:
                raise IcebergSourceError(f"Iceberg source: {exc}") from None
        use_python_data_source(ctx.spark, IcebergSnapshotSource)
        bounded_head = None
        if not ctx.unbounded:
            current = table.metadata.current_snapshot()
            bounded_head = self._use_snapshot(table) if current is not None else None
        options = stream_options(
            catalog_name=self.opts["catalog_name"], catalog=flat_properties(self.opts["iceberg.catalog.config"]),
            identifier=(self.opts["namespace"], self.opts["table"]), branch=None, initial=initial,
            bounded_head=bounded_head, max_rows=ctx.max_rows_per_batch, partitions=max(1, ctx.parallelism * 2),
            schema_json=struct.json())
        return ctx.spark.readStream.format(SOURCE_NAME).options(**options).schema(struct).load()
