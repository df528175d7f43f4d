"""Iceberg sink: SeaTunnel's ``Iceberg`` sink options, each micro-batch one Iceberg snapshot at most."""

from __future__ import annotations

from seatide.connectors.iceberg.catalogs import CatalogConfigError, check_config, flat_properties
from seatide.connectors.iceberg.merge_on_read import MODE_PROPERTIES, MODES
from seatide.connectors.iceberg.spec import IcebergSinkSpec, split_keys
from seatide.connectors.iceberg.targets import IcebergTargets
from seatide.plugin.base import Sink, SinkContext
from seatide.plugin.options import BOOL, INT, OBJECT, REQUIRED, STRING, Option, enum, flatten
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ALL_KINDS, INSERT_ONLY

SCHEMA_SAVE_MODES = ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE")
DATA_SAVE_MODES = ("DROP_DATA", "APPEND_DATA", "ERROR_WHEN_DATA_EXISTS")
# write-props SeaTide applies itself; the others are stored as table properties at creation
FILE_FORMATS = ("parquet",)
# Expiry keeps at least a batch's snapshot and one after it (a compaction), so that a batch the
# catalog committed and the runtime did not record yet is found again (commits.py, "the mark").
MIN_RETAIN_LAST = 2


@register
class IcebergSink(Sink):
    """Writes rows into an Iceberg table: Spark's executors write parquet data files under the
    table's data location, the runtime decides the batch, and the driver commits its files as one
    snapshot per micro-batch whose summary carries the batch's transaction id; a replay finds it
    and commits nothing (``targets``: one path for one table and for a multi-table input, a
    target per Iceberg table).

    With primary keys, changes (updates, deletes) are applied copy-on-write: the data files
    holding a changed key are rewritten without it, in the same snapshot as the new rows; or
    merge-on-read when the table's ``write.*.mode`` properties say so: the new rows and
    equality deletes of the changed keys (``merge_on_read``).
    """

    plugin_name = "Iceberg"
    row_kind_hint = ("set iceberg.table.primary-keys (and iceberg.table.upsert-mode-enabled = true) so "
                     "updates and deletes are applied by key, or put FilterRowKind before it")
    options = (
        Option("catalog_name", STRING, "default", "the catalog's name (the JDBC catalog's catalog_name column)"),
        Option("namespace", STRING, "default", "the namespace (database) of the table"),
        Option("table", STRING, REQUIRED, "the table's name in the namespace"),
        Option("iceberg.catalog.config", OBJECT, REQUIRED,
               "the catalog: type = hadoop (warehouse = a directory), jdbc (uri = jdbc:postgresql://... or "
               "jdbc:sqlite:..., jdbc.user, jdbc.password, warehouse) or rest (uri, ...)"),
        Option("hadoop.config", OBJECT, None, "accepted; SeaTide writes through Spark and pyiceberg on the "
               "local filesystem, so no Hadoop setting applies (a warning says so)"),
        Option("iceberg.hadoop-conf-path", STRING, None, "accepted; no Hadoop configuration files are read "
               "(a warning says so)"),
        Option("case_sensitive", BOOL, False,
               "match input fields to the table's columns with case (false: ID fills column id)"),
        Option("iceberg.table.write-props", OBJECT, None,
               "table properties: write.parquet.compression-codec and write.target-file-size-bytes shape "
               "SeaTide's files; write.upsert.mode / write.update.mode / write.delete.mode = merge-on-read "
               "apply changes by equality deletes (default copy-on-write); all are set on a table SeaTide creates"),
        Option("iceberg.table.auto-create-props", OBJECT, None, "table properties for a table SeaTide creates"),
        Option("iceberg.table.schema-evolution-enabled", BOOL, False,
               "add input fields the table lacks as new columns (and widen types Iceberg can widen)"),
        Option("iceberg.table.primary-keys", STRING, None,
               "comma-separated key columns: the table's identifier fields; updates and deletes apply by them"),
        Option("iceberg.table.partition-keys", STRING, None,
               "comma-separated columns a created table is partitioned by (identity)"),
        Option("iceberg.table.upsert-mode-enabled", BOOL, False,
               "an insert of an existing key replaces its row (needs primary keys)"),
        Option("iceberg.table.commit-branch", STRING, None,
               "commit to this branch (created at main's current snapshot when missing)"),
        Option("schema_save_mode", enum(*SCHEMA_SAVE_MODES), "CREATE_SCHEMA_WHEN_NOT_EXIST",
               "before the first batch: RECREATE_SCHEMA drops and creates the table; "
               "ERROR_WHEN_SCHEMA_NOT_EXIST fails if it is missing; CREATE_SCHEMA_WHEN_NOT_EXIST creates it; "
               "IGNORE expects it"),
        Option("data_save_mode", enum(*DATA_SAVE_MODES), "APPEND_DATA",
               "before the first batch: DROP_DATA deletes the table's rows (one snapshot); "
               "ERROR_WHEN_DATA_EXISTS fails if it has rows; APPEND_DATA keeps them"),
        Option("iceberg.maintenance.expire-snapshots-older-than-ms", INT, None,
               "SeaTide: after each commit, expire snapshots older than this (ms) beyond the newest "
               "iceberg.maintenance.retain-last; unset: never"),
        Option("iceberg.maintenance.retain-last", INT, 100,
               f"SeaTide: snapshots always kept by expiry, at least {MIN_RETAIN_LAST} (the newest batch's and a "
               "compaction after it); more than other writers add between two batches is advised"),
        Option("iceberg.maintenance.rewrite-every-commits", INT, 0,
               "SeaTide: every N commits, rewrite the table's small data files into larger ones (0: never)"),
        Option("iceberg.maintenance.rewrite-target-file-size-bytes", INT, 128 * 1024 * 1024,
               "SeaTide: files smaller than this are rewritten together by the compaction"),
    )

    def check(self) -> None:
        opts = self.opts
        config = flat_properties(opts["iceberg.catalog.config"])
        try:
            check_config(config)
        except CatalogConfigError as exc:
            raise self.invalid("iceberg.catalog.config", str(exc)) from None
        self.primary_keys = split_keys(opts["iceberg.table.primary-keys"])
        self.partition_keys = split_keys(opts["iceberg.table.partition-keys"])
        if opts["iceberg.table.upsert-mode-enabled"] and not self.primary_keys:
            raise self.invalid("iceberg.table.upsert-mode-enabled",
                               "iceberg.table.upsert-mode-enabled = true needs iceberg.table.primary-keys "
                               "(the columns a row is found by), e.g. iceberg.table.primary-keys = \"id\"")
        props = flat_properties(opts["iceberg.table.write-props"])
        fmt = str(props.get("write.format.default", "parquet")).lower()
        if fmt not in FILE_FORMATS:
            raise self.invalid("iceberg.table.write-props",
                               f"iceberg.table.write-props: write.format.default = {fmt} is not supported; "
                               "SeaTide writes parquet data files")
        for key in MODE_PROPERTIES:
            if key in props and str(props[key]).lower() not in MODES:
                raise self.invalid("iceberg.table.write-props",
                                   f"iceberg.table.write-props: {key} = {props[key]} is not one of {', '.join(MODES)}")
        for key in ("hadoop.config", "iceberg.hadoop-conf-path"):
            if opts.given(key):
                self.notice(key, f"option '{key}' is ignored: SeaTide reaches Iceberg tables through pyiceberg "
                                 "and Spark on the local filesystem, without Hadoop's configuration")
        for key in ("iceberg.maintenance.retain-last", "iceberg.maintenance.rewrite-every-commits"):
            if opts[key] < 0:
                raise self.invalid(key, f"option '{key}' must be 0 or more")
        if opts["iceberg.maintenance.retain-last"] < MIN_RETAIN_LAST:
            raise self.invalid("iceberg.maintenance.retain-last",
                               f"option 'iceberg.maintenance.retain-last' must keep at least {MIN_RETAIN_LAST} "
                               "snapshots: the newest batch's and a compaction's after it, so that a batch the "
                               "catalog committed before a crash is found again and not committed twice")
        # Changes (updates, deletes) can be applied only by key.
        self.accepted_row_kinds = ALL_KINDS if self.primary_keys else INSERT_ONLY

    @property
    def keeps_last_change_per_key(self) -> bool:
        return bool(getattr(self, "primary_keys", ()))   # set by check()

    def change_keys(self) -> "tuple[str, tuple[str, ...]] | None":
        return ("iceberg.table.primary-keys", tuple(self.primary_keys)) if self.primary_keys else None

    def spec(self) -> IcebergSinkSpec:
        opts = self.opts
        return IcebergSinkSpec(
            catalog_name=opts["catalog_name"], catalog_config=flat_properties(opts["iceberg.catalog.config"]),
            namespace=opts["namespace"], table=opts["table"],
            write_props=flat_properties(opts["iceberg.table.write-props"]),
            auto_create_props=flat_properties(opts["iceberg.table.auto-create-props"]),
            primary_keys=self.primary_keys, partition_keys=self.partition_keys,
            upsert=opts["iceberg.table.upsert-mode-enabled"],
            schema_evolution=opts["iceberg.table.schema-evolution-enabled"],
            case_sensitive=opts["case_sensitive"], branch=opts["iceberg.table.commit-branch"],
            schema_save_mode=opts["schema_save_mode"], data_save_mode=opts["data_save_mode"],
            expire_older_than_ms=opts["iceberg.maintenance.expire-snapshots-older-than-ms"],
            retain_last=opts["iceberg.maintenance.retain-last"],
            rewrite_every=opts["iceberg.maintenance.rewrite-every-commits"],
            rewrite_target_bytes=opts["iceberg.maintenance.rewrite-target-file-size-bytes"])

    @classmethod
    def table_defaults(cls, body: dict, table, multi_table: bool) -> dict:
        """On a multi-table input, no ``iceberg.table.primary-keys`` means each table's own primary
        key (none: its rows are appended), as SeaTunnel's Iceberg sink takes it from the table."""
        if not multi_table or table is None or flatten(body).get("iceberg.table.primary-keys") is not None:
            return body
        if table.primary_key is None:
            return body
        return {**body, "iceberg.table.primary-keys": ",".join(table.primary_key.columns)}

    def open_targets(self, ctx: SinkContext | None, routes, multi: bool) -> IcebergTargets:
        return IcebergTargets(ctx, routes, multi)
