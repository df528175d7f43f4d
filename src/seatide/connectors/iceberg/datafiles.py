"""Data files of an Iceberg table, written by Spark's executors and described for a commit.

Spark writes a batch's rows as parquet into a directory of the batch's and attempt's own
under the table's data location (``write.data.path``, default ``<table>/data``); files are
referenced by their absolute paths, so they never move. The driver then reads each file's
footer (row count, column sizes, bounds: no row passes through it) and turns it into
pyiceberg's ``DataFile`` for the snapshot. A file no snapshot ever references (an attempt
that lost, a crash before the commit) is an orphan: the attempt that stages the batch again
removes its own; see maintenance.remove_orphans for the rest.
"""

from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager

from seatide.connectors.iceberg.schema import spark_struct

STAGING_PREFIX = "seatide-"
_CODECS = {"zstd": "zstd", "gzip": "gzip", "snappy": "snappy", "uncompressed": "none", "none": "none",
           "lz4": "lz4", "lz4_raw": "lz4_raw", "brotli": "brotli"}
_PARTITION_ALIAS = "__seatide_p"


class IcebergWriteError(ValueError):
    """The table and the input disagree (the message names the field and the way out)."""


def local_path(uri: str) -> str:
    """The local path of a table or file location (``file:`` or a plain path)."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("file:"):
        return uri[len("file:"):]
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", uri):
        raise IcebergWriteError(f"location {uri} is not on the local filesystem; SeaTide writes and reads "
                                "Iceberg data files on the local filesystem only (file:// or a path)")
    return uri


def file_uri(path: str) -> str:
    return "file://" + path


def data_root(metadata) -> str:
    """The directory data files go to (``write.data.path`` or ``<location>/data``)."""
    return local_path(metadata.properties.get("write.data.path", metadata.location.rstrip("/") + "/data"))


def staging_dir(metadata, transaction_id: str, sink_key: str, attempt: str) -> str:
    text = f"{transaction_id}-{sink_key}-{attempt or '0'}"
    name = STAGING_PREFIX + "".join(ch if ch.isalnum() or ch in "._=-" else "_" for ch in text)
    return os.path.join(data_root(metadata), name)


def codec(metadata) -> str:
    name = metadata.properties.get("write.parquet.compression-codec", "zstd").lower()
    if name not in _CODECS:
        raise IcebergWriteError(f"write.parquet.compression-codec = {name} is not one of {', '.join(_CODECS)}")
    return _CODECS[name]


@contextmanager
def session_conf(spark, key: str, value: str):
    """The session's ``key`` set to ``value`` for the block, then as it was."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def micros_timestamps(spark):
    """Parquet timestamps as INT64 microseconds, as Iceberg requires (Spark writes INT96 by default)."""
    return session_conf(spark, "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def conform(df, schema, case_sensitive: bool, keep: tuple[str, ...] | list[str] = ()):
    """``df``'s columns as the table's: its spelling, order and types; a missing optional column is NULL;
    the ``keep`` columns (the row kind) follow as they are.

    Raises ``IcebergWriteError`` for an input field the table lacks, or a missing required one."""
    from pyspark.sql import functions as F

    struct = spark_struct(schema)
    columns = {c if case_sensitive else c.lower(): c for c in df.columns if c not in keep}
    extra = set(columns) - {(f.name if case_sensitive else f.name.lower()) for f in struct.fields}
    if extra:
        raise IcebergWriteError(f"the input has fields the table lacks: {', '.join(sorted(columns[c] for c in extra))}; "
                                "add them to the table or set iceberg.table.schema-evolution-enabled = true")
    out = []
    for field, iceberg_field in zip(struct.fields, schema.fields):
        source = columns.get(field.name if case_sensitive else field.name.lower())
        if source is None:
            if iceberg_field.required:
                raise IcebergWriteError(f"the input has no field {field.name}, which the table requires")
            out.append(F.lit(None).cast(field.dataType).alias(field.name))
        else:
            column = F.col("`" + source.replace("`", "``") + "`")
            out.append(column.cast(field.dataType).alias(field.name))
    return df.select(*out, *[F.col(c) for c in keep])


def write_files(spark, df, metadata, directory: str, partition_columns: list[str]) -> list[str]:
    """Spark writes ``df`` as parquet into ``directory`` (emptied first); the files' local paths.

    Partitioned tables get one directory per partition value (from copies of the partition
    columns, so the files keep the columns: Iceberg's files hold every field)."""
    from pyspark.sql import functions as F

    shutil.rmtree(directory, ignore_errors=True)
    aliases = [f"{_PARTITION_ALIAS}{i}" for i in range(len(partition_columns))]
    if partition_columns:
        df = df.select("*", *[F.col("`" + c + "`").alias(a) for c, a in zip(partition_columns, aliases)])
    writer = df.write.mode("overwrite").option("compression", codec(metadata))
    if partition_columns:
        writer = writer.partitionBy(*aliases)
    with micros_timestamps(spark):
        writer.parquet(file_uri(directory))
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")) or d.startswith(_PARTITION_ALIAS))
        found.extend(os.path.join(root, f) for f in sorted(files)
                     if f.endswith(".parquet") and not f.startswith((".", "_")))
    return found


def describe(metadata, paths: list[str], spec_id: int | None = None, equality_ids: list[int] | None = None) -> list:
    """pyiceberg ``DataFile``s for the parquet files at ``paths`` (files without rows are dropped
    and deleted). Partition values come from the footers' exact bounds of the partition columns.
    With ``equality_ids`` the files are equality deletes on those fields (their rows hold them)."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (compute_statistics_plan, data_file_statistics_from_parquet_metadata,
                                      parquet_path_to_id_mapping)
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    schema = metadata.schema()
    spec = metadata.specs()[spec_id if spec_id is not None else metadata.default_spec_id]
    properties = dict(metadata.properties)
    for field in spec.fields:      # partition values are read from bounds: they must not be truncated
        properties[f"write.metadata.metrics.column.{schema.find_column_name(field.source_id)}"] = "full"
    plan = compute_statistics_plan(schema, properties)
    mapping = parquet_path_to_id_mapping(schema)
    files = []
    for path in paths:
        footer = pq.read_metadata(path)
        if footer.num_rows == 0:
            os.remove(path)
            continue
        stats = data_file_statistics_from_parquet_metadata(footer, plan, mapping)
        files.append(DataFile.from_args(
            content=DataFileContent.EQUALITY_DELETES if equality_ids else DataFileContent.DATA,
            file_path=file_uri(path), file_format=FileFormat.PARQUET,
            partition=stats.partition(spec, schema), file_size_in_bytes=os.path.getsize(path), sort_order_id=None,
            spec_id=spec.spec_id, equality_ids=list(equality_ids) if equality_ids else None, key_metadata=None,
            **stats.to_serialized_dict()))
    return files


__all__ = ["IcebergWriteError", "STAGING_PREFIX", "codec", "conform", "data_root", "describe", "file_uri",
           "local_path", "micros_timestamps", "session_conf", "staging_dir", "write_files"]
