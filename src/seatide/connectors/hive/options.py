"""Options the Hive sink and source share (SeaTunnel's pages list them on both)."""

from __future__ import annotations

from seatide.plugin.options import OBJECT, REQUIRED, STRING, Option

COMMON = (
    Option("table_name", STRING, REQUIRED, "the table, database.table; it must exist in the metastore"),
    Option("metastore_uri", STRING, None, "the metastore, thrift://host:9083 (several: comma-separated); "
           "without it, hive_site_path's hive.metastore.uris"),
    Option("hive_site_path", STRING, None, "a hive-site.xml whose hive.metastore.uris is used when metastore_uri "
           "is not given"),
    Option("hdfs_site_path", STRING, None, "accepted; SeaTide reads and writes table locations on the local "
           "filesystem (a warning says so)"),
    Option("hive.hadoop.conf", OBJECT, None, "accepted; no Hadoop setting applies to local table locations "
           "(a warning says so)"),
    Option("hive.hadoop.conf-path", STRING, None, "accepted; no Hadoop file is read (a warning says so)"),
    Option("krb5_path", STRING, "/etc/krb5.conf", "Kerberos is not supported: a metastore is reached without it"),
    Option("kerberos_principal", STRING, None, "refused: SeaTide reaches a metastore without Kerberos"),
    Option("kerberos_keytab_path", STRING, None, "refused: SeaTide reaches a metastore without Kerberos"),
)
IGNORED = ("hdfs_site_path", "hive.hadoop.conf", "hive.hadoop.conf-path")


def check_common(plugin) -> list[str]:
    """Cross-option checks of both plugins; returns the metastore URIs."""
    from seatide.connectors.hive.metastore import HiveError, metastore_uris

    opts = plugin.opts
    for key in ("kerberos_principal", "kerberos_keytab_path"):
        if opts[key]:
            raise plugin.invalid(key, f"option '{key}': SeaTide does not reach a metastore with Kerberos; use a "
                                      "metastore that accepts plain thrift connections")
    table = opts["table_name"]
    if "." not in table.strip(".") or table.count(".") != 1:
        raise plugin.invalid("table_name", f"option 'table_name' must be database.table, got {table!r}")
    try:
        uris = metastore_uris(opts["metastore_uri"], opts["hive_site_path"])
    except HiveError as exc:
        key = "metastore_uri" if opts["metastore_uri"] else "hive_site_path"
        raise plugin.invalid(key, f"option '{key}': {exc}") from None
    if not uris:
        raise plugin.invalid("metastore_uri", "required option 'metastore_uri' is missing (thrift://host:9083), "
                                              "and no hive_site_path gives hive.metastore.uris")
    for key in IGNORED:
        if opts.given(key):
            plugin.notice(key, f"option '{key}' is ignored: SeaTide reads and writes Hive tables whose location is "
                               "a local directory, without Hadoop's configuration")
    return uris


def spark_type(hive_type: str, where: str):
    """The Spark type of a Hive column type (varchar/char read as string)."""
    import re

    from pyspark.sql import types as T

    text = re.sub(r"\b(var)?char\(\d+\)", "string", hive_type.strip(), flags=re.IGNORECASE)
    try:
        return T._parse_datatype_string(text)
    except Exception:
        from seatide.connectors.hive.metastore import HiveError

        raise HiveError(f"column {where} has Hive type {hive_type}, which SeaTide cannot map to a Spark type") from None


__all__ = ["COMMON", "check_common", "spark_type"]
