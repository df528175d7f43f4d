"""A Hive target: one table, written as LocalFile writes a directory (``file/target.py``) into the
table's location, with the table's partitions registered.

* **prepare**: the table must exist (its storage is read from the metastore when the target
  opens); ``data_save_mode`` DROP_DATA decides the table's data files once and removes only
  those, ERROR_WHEN_DATA_EXISTS refuses a table with any.
* **stage**: the input is matched to the table (its column names, any case; its types), then
  staged as LocalFile stages it, under ``<table location>/.seatide-staging/`` (hidden from Hive
  and Spark), with the partition columns as directories ``key=value`` (Hive's escaping, which
  Spark's writer shares; NULL as ``__HIVE_DEFAULT_PARTITION__``) and not in the files. The part
  lists the moves and the batch's partitions.
* **publish**: the files are moved into place (idempotent), then the partitions are added to the
  metastore with ``ifNotExists`` (idempotent too). A crash anywhere in it is rolled forward by
  the next attempt from the decision.
"""

from __future__ import annotations

import os
from urllib.parse import unquote

from seatide.connectors.file import formats
from seatide.connectors.file.naming import FileNamer
from seatide.connectors.file.spec import FileSinkSpec
from seatide.connectors.file.target import LocalFileTarget
from seatide.connectors.hive import metastore
from seatide.connectors.hive.options import spark_type
from seatide.plugin.base import Batch, PermanentError, StagedBatch
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.sink_protocol import TargetRows
from seatide.plugin.tables import TableRoute


class HiveSinkError(PermanentError):
    """The table and the input disagree; the message names the column and the way out."""


def table_spec(table: metastore.HiveTable, codec: str, data_save_mode: str = "APPEND_DATA") -> FileSinkSpec:
    fmt = table.file_format
    error = formats.codec_error(fmt, codec)
    if error:
        raise HiveSinkError(f"Hive sink: option 'compress_codec': {error}")
    options = formats.writer_options(fmt, delimiter=table.field_delimiter, row_delimiter="\n", header=False,
                                     codec=codec, encoding="UTF-8", quote_mode="NONE")
    if fmt == "text":        # Hive's LazySimpleSerDe: \N for NULL, its date and timestamp text
        options |= {"nullValue": "\\N", "dateFormat": "yyyy-MM-dd",
                    "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS", "timestampNTZFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS"}
    return FileSinkSpec(
        root=table.location, file_format=fmt, spark_options=options, namer=FileNamer(None, "yyyy.MM.dd"),
        extension=None, partition_by=tuple(k for k, _ in table.partition_keys), partition_expression=None,
        partition_fields_in_file=False, sink_columns=tuple(c for c, _ in table.columns), max_rows_per_file=0,
        single_file=False, empty_file_when_no_data=False, schema_save_mode="IGNORE",
        data_save_mode=data_save_mode)


class HiveTarget(LocalFileTarget):
    system = "Hive sink"

    def __init__(self, key: str, routes: list[TableRoute], uris: list[str], codec: str, data_save_mode: str,
                 sink_id: str = ""):
        self.uris = uris
        try:
            with metastore.connect(uris) as client:
                self.table = metastore.get_table(client, key)
        except metastore.HiveError as exc:
            raise HiveSinkError(f"Hive sink: {exc}") from None
        spec = table_spec(self.table, codec, data_save_mode)
        super().__init__(key, routes, {r.index: spec for r in routes}, sink_id)
        self.refuses_ahead = True       # the table's columns the input lacks (``check_save_modes``)

    @property
    def place(self) -> str:
        return f"table {self.key} (at {self.root})"

    def check_save_modes(self, schema) -> None:
        """The file sink's look, then how the input's fields fit the table's columns, as staging would
        refuse them (the columns were read from the metastore when the target was opened)."""
        if self.save_modes:
            super().check_save_modes(schema)
        if schema is not None:
            try:
                self._fit(schema.names)
            except metastore.HiveError as exc:    # as staging judges it: the table's type, not a passing fault
                raise HiveSinkError(f"Hive sink: {exc}") from None

    def _staged_frame(self, df):
        try:
            return self._as_table(super()._staged_frame(df))
        except metastore.HiveError as exc:
            raise HiveSinkError(f"Hive sink: {exc}") from None

    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        staged = super().stage(rows, batch)
        root = self.spec.root
        found = set()
        for _, target in staged.publish["moves"]:
            relative = os.path.relpath(os.path.dirname(target), root)
            if self.spec.partition_by and relative != ".":
                found.add(tuple(unquote(part.split("=", 1)[1]) for part in relative.split(os.sep)))
        return StagedBatch(publish={**staged.publish, "partitions": [list(p) for p in sorted(found)]},
                           state=staged.state)

    def publish(self, part: dict) -> None:
        super().publish(part)
        if part.get("partitions"):
            with metastore.connect(self.uris) as client:
                metastore.add_partitions(client, self.table, part["partitions"])

    def _target_dir(self, spec: FileSinkSpec, relative_dir: str) -> str:
        """Spark's ``__seatide_pN=<escaped value>`` directories, named by the partition keys."""
        if not spec.partition_by or not relative_dir:
            return spec.root
        parts = relative_dir.split(os.sep)
        named = [f"{key}={part.split('=', 1)[1]}" for key, part in zip(spec.partition_by, parts)]
        return os.path.join(spec.root, *named)

    def _as_table(self, df):
        """The input's columns as the table's: its names (matched in any case), types and order."""
        from pyspark.sql import functions as F

        by_name, kinds = self._fit(df.columns)
        out = [F.col(f"`{by_name[name.lower()]}`").cast(kind).alias(name)
               for (name, _), kind in zip(self.table.columns, kinds)]
        for name, _ in self.table.partition_keys:
            value = F.col(f"`{by_name[name.lower()]}`").cast("string")
            out.append(F.coalesce(value, F.lit(metastore.DEFAULT_PARTITION)).alias(name))
        return df.select(*out)

    def _fit(self, fields: list[str]):
        """The input's ``fields`` by lower-cased name, and the Spark type of each table column; raises
        where the input lacks a column, or a text table has a column SeaTide cannot write."""
        from pyspark.sql import types as T

        by_name = {c.lower(): c for c in fields if c != ROW_KIND_COLUMN}
        wanted = [*self.table.columns, *self.table.partition_keys]
        missing = [name for name, _ in wanted if name.lower() not in by_name]
        if missing:
            raise HiveSinkError(f"Hive sink: table {self.table.database}.{self.table.name} has columns "
                                f"{', '.join(missing)}, which the input does not have (fields: "
                                f"{', '.join(by_name.values())})")
        kinds = []
        for name, hive_type in self.table.columns:
            kind = spark_type(hive_type, name)
            if self.table.file_format == "text" and isinstance(kind, (T.ArrayType, T.MapType, T.StructType)):
                raise HiveSinkError(f"Hive sink: column {name} is {hive_type}; SeaTide writes text tables with "
                                    "primitive columns only (store the table as parquet or orc)")
            kinds.append(kind)
        return by_name, kinds


__all__ = ["HiveSinkError", "HiveTarget", "table_spec"]
