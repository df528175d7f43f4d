"""Hive source: SeaTunnel's ``Hive`` source options; a table (all or chosen partitions) read by Spark.

The metastore gives the table's location, format, columns and partitions; Spark's file sources
read the partition directories (``basePath`` the table's location, so the partition columns come
from the directory names, typed as the table declares them). BATCH jobs without
``checkpoint.interval`` only: a Hive table has no change log to resume a stream from.
"""

from __future__ import annotations

import os

from seatide.connectors.hive import metastore
from seatide.connectors.hive.options import COMMON, check_common, spark_type
from seatide.plugin.base import PermanentError, ReadContext, Source
from seatide.plugin.options import STRING, STRING_LIST, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN


class HiveSourceError(PermanentError):
    pass


@register
class HiveSource(Source):
    plugin_name = "Hive"
    options = (
        *COMMON,
        Option("read_partitions", STRING_LIST, None,
               "partitions to read, as their directories (\"dt=2024-01-01\", or deeper \"dt=2024-01-01/region=eu\", all "
               "of one depth); default every partition"),
        Option("read_columns", STRING_LIST, None, "columns to read, in this order (default all, partition columns last)"),
        Option("compress_codec", STRING, "none", "accepted; the files' codec is read from the files"),
    )

    def check(self) -> None:
        self.uris = check_common(self)
        depths = {len(p.strip("/").split("/")) for p in self.opts["read_partitions"] or []}
        if len(depths) > 1:
            raise self.invalid("read_partitions", "every partition in read_partitions must have the same depth "
                                                  "(e.g. all dt=... or all dt=.../region=...)")

    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if ctx.micro_batch:
            raise HiveSourceError("Hive source: reads BATCH jobs without checkpoint.interval (a Hive table has no "
                                  "change log to stream or resume from); remove checkpoint.interval")
        try:
            with metastore.connect(self.uris) as client:
                table = metastore.get_table(client, self.opts["table_name"])
                parts = metastore.partitions(client, table) if table.partition_keys else []
            fields = [T.StructField(n, spark_type(t, n)) for n, t in (*table.columns, *table.partition_keys)]
        except metastore.HiveError as exc:
            raise HiveSourceError(f"Hive source: {exc}") from None
        struct = T.StructType(fields)
        if table.partition_keys:
            keys = [k for k, _ in table.partition_keys]
            chosen = self._chosen(keys, parts)
            paths = [location for _, location in chosen if os.path.isdir(location)]
        else:
            paths = [table.location] if os.path.isdir(table.location) else []
        if not paths:
            df = ctx.spark.createDataFrame([], struct)
        else:
            reader = ctx.spark.read.schema(struct).option("basePath", "file://" + table.location)
            if table.file_format == "text":
                reader = (reader.format("csv").option("sep", table.field_delimiter).option("quote", "")
                          .option("nullValue", "\\N").option("timestampFormat", "yyyy-MM-dd HH:mm:ss[.SSSSSS]"))
            else:
                reader = reader.format(table.file_format)
            df = reader.load(["file://" + p for p in paths])
        columns = self.opts["read_columns"]
        if columns:
            by_name = {c.lower(): c for c in df.columns}
            missing = [c for c in columns if c.lower() not in by_name]
            if missing:
                raise HiveSourceError(f"Hive source: read_columns names {', '.join(missing)}, which table "
                                      f"{self.opts['table_name']} does not have (columns: {', '.join(df.columns)})")
            df = df.select(*[F.col(f"`{by_name[c.lower()]}`") for c in columns])
        return df.withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))

    def _chosen(self, keys: list[str], parts: list[tuple[list[str], str]]) -> list[tuple[list[str], str]]:
        wanted = self.opts["read_partitions"]
        if not wanted:
            return parts
        chosen = []
        for text in wanted:
            pairs = [p.split("=", 1) for p in text.strip("/").split("/")]
            if any(len(p) != 2 for p in pairs) or [k.lower() for k, _ in pairs] != [k.lower() for k in keys[:len(pairs)]]:
                raise HiveSourceError(f"Hive source: read_partitions entry {text!r} must name partition keys in order: "
                                      + "/".join(f"{k}=..." for k in keys))
            values = [v for _, v in pairs]
            chosen.extend(p for p in parts if p[0][:len(values)] == values and p not in chosen)
        return chosen
