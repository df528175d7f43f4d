"""Paimon's options, SeaTunnel's names and defaults (its Paimon sink and source pages), declared once."""

from __future__ import annotations

from seatide.plugin.options import OBJECT, REQUIRED, STRING, Option, enum

SCHEMA_SAVE_MODES = ("RECREATE_SCHEMA", "CREATE_SCHEMA_WHEN_NOT_EXIST", "ERROR_WHEN_SCHEMA_NOT_EXIST", "IGNORE")
DATA_SAVE_MODES = ("DROP_DATA", "APPEND_DATA", "ERROR_WHEN_DATA_EXISTS")

# What the sink and the source share (both of SeaTunnel's pages list them).
CATALOG = (
    Option("warehouse", STRING, REQUIRED, "the warehouse: a local directory, as a path or file:///path"),
    Option("catalog_type", enum("filesystem", "hive"), "filesystem",
           "filesystem (the warehouse's own metadata); hive is refused: SeaTide has no Hive catalog for Paimon"),
    Option("catalog_name", STRING, "paimon", "the catalog's name (accepted; a filesystem catalog has no name)"),
    Option("catalog_uri", STRING, None, "a Hive catalog's metastore URI; refused (catalog_type = hive is)"),
    Option("database", STRING, REQUIRED, "the database of the table (created by the sink when missing)"),
    Option("table", STRING, REQUIRED, "the table's name in the database"),
    Option("hdfs_site_path", STRING, None, "accepted; the warehouse is local, no Hadoop file is read "
           "(a warning says so)"),
    Option("paimon.hadoop.conf", OBJECT, None, "accepted; no Hadoop setting applies to a local warehouse "
           "(a warning says so)"),
    Option("paimon.hadoop.conf-path", STRING, None, "accepted; no Hadoop file is read (a warning says so)"),
)
IGNORED = ("hdfs_site_path", "paimon.hadoop.conf", "paimon.hadoop.conf-path")

SINK = (
    *CATALOG,
    Option("schema_save_mode", enum(*SCHEMA_SAVE_MODES), "CREATE_SCHEMA_WHEN_NOT_EXIST",
           "before the first batch: RECREATE_SCHEMA drops the table and creates it again from the input; "
           "CREATE_SCHEMA_WHEN_NOT_EXIST creates it when missing; ERROR_WHEN_SCHEMA_NOT_EXIST fails when it "
           "is missing; IGNORE expects it"),
    Option("data_save_mode", enum(*DATA_SAVE_MODES), "APPEND_DATA",
           "before the first batch: DROP_DATA removes the rows the table holds then (one snapshot); "
           "ERROR_WHEN_DATA_EXISTS fails when it has rows; APPEND_DATA keeps them"),
    Option("paimon.table.primary-keys", STRING, None,
           "comma-separated key columns of a table the sink creates (partition columns among them); with "
           "keys, inserts and updates are upserts and deletes delete (default: the input's primary key)"),
    Option("paimon.table.partition-keys", STRING, None, "comma-separated partition columns of a table the "
           "sink creates"),
    Option("paimon.table.write-props", OBJECT, None,
           "table options of a table the sink creates (bucket, file.format, changelog-producer, ...)"),
)

SOURCE = (
    *CATALOG,
    Option("query", STRING, None,
           "select ... from <table> where ...: the columns read and a filter (=, !=, <, <=, >, >=, and, or, "
           "is null, is not null); string and boolean values in single quotes"),
)


def split_keys(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def check_catalog(plugin) -> None:
    """The checks both plugins make of the options they share."""
    opts = plugin.opts
    if opts["catalog_type"] == "hive":
        raise plugin.invalid("catalog_type", "option 'catalog_type': hive is not supported; SeaTide reaches Paimon "
                                             "through its filesystem catalog (catalog_type = filesystem, the default)")
    from seatide.connectors.paimon.warehouse import WarehouseError, warehouse_path

    try:
        warehouse_path(opts["warehouse"])
    except WarehouseError as exc:
        raise plugin.invalid("warehouse", f"option 'warehouse': {exc}") from None
    for key in ("database", "table"):
        if not str(opts[key]).strip() or "." in opts[key]:
            raise plugin.invalid(key, f"option '{key}' must be a plain name (no dots), got {opts[key]!r}")
    for key in IGNORED:
        if opts.given(key):
            plugin.notice(key, f"option '{key}' is ignored: SeaTide reads and writes a Paimon warehouse on the "
                               "local filesystem, without Hadoop's configuration")


__all__ = ["CATALOG", "DATA_SAVE_MODES", "SCHEMA_SAVE_MODES", "SINK", "SOURCE", "check_catalog", "split_keys"]
