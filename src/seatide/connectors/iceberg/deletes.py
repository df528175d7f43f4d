"""A snapshot's live files and its rows with the delete files applied (merge-on-read), by Spark.

pyiceberg 0.12 refuses to plan a table with equality deletes (the ones SeaTunnel's and Flink's
upsert mode write, and SeaTide's merge-on-read mode). ``plan`` lists a snapshot's live data and
delete files itself, each with its data sequence number, from the manifests; ``read`` lets
Spark read the data files and drop deleted rows with anti-joins, as Iceberg's spec says:

* an **equality delete** (its rows hold the values of its ``equality_ids`` fields) removes a
  row whose values are equal (NULL equal to NULL) when the row's data file has a **strictly
  lower** data sequence number, in the same partition (or anywhere, when the delete file's
  spec is unpartitioned): rows added in the delete's own snapshot stay;
* a **position delete** (``file_path``, ``pos``) removes row ``pos`` of that file when the
  file's sequence number is lower or equal, in the same partition.

For each group of equality fields only the newest delete sequence per value (and partition) is
kept before the join, so many batches deleting the same key cost one row. Rows never pass the
driver; it only reads manifests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from seatide.connectors.iceberg.datafiles import file_uri, local_path, session_conf

_PATH, _SEQ, _PART, _FILE, _POS = "__seatide_path", "__seatide_seq", "__seatide_part", "__seatide_file", "__seatide_pos"
_PLAIN = re.compile(r"^[A-Za-z0-9/._=+-]*$")     # paths Spark names as they are (no URI escapes)


@dataclass(frozen=True)
class LiveFile:
    file: object          # pyiceberg DataFile (data, position or equality deletes)
    sequence: int         # its data sequence number


@dataclass
class Plan:
    data: list[LiveFile] = field(default_factory=list)
    deletes: list[LiveFile] = field(default_factory=list)

    @property
    def equality_deletes(self) -> list[LiveFile]:
        return [f for f in self.deletes if f.file.content.value == 2]

    @property
    def position_deletes(self) -> list[LiveFile]:
        return [f for f in self.deletes if f.file.content.value == 1]


def plan(table, snapshot_id: int | None, row_filter=None, case_sensitive: bool = True) -> Plan:
    """The live files of ``snapshot_id``; with ``row_filter``, the data files whose metrics may
    match it (every delete file is kept: it may apply to any of them)."""
    out = Plan()
    if snapshot_id is None:
        return out
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ValueError(f"snapshot {snapshot_id} is not in the table (expired?)")
    may_match = None
    if row_filter is not None:
        from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator

        may_match = _InclusiveMetricsEvaluator(table.metadata.schema(), row_filter, case_sensitive).eval
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            live = LiveFile(entry.data_file, entry.sequence_number or 0)
            if entry.data_file.content.value == 0:
                if may_match is None or may_match(entry.data_file):
                    out.data.append(live)
            else:
                out.deletes.append(live)
    out.data.sort(key=lambda f: f.file.file_path)
    return out


def spark_path(spark, path: str) -> str:
    """The name Spark's ``_metadata.file_path`` gives a local file (a URI, escaped as Hadoop does)."""
    local = local_path(path)
    if _PLAIN.match(local):
        return "file:" + local
    return "file:" + spark._jvm.org.apache.hadoop.fs.Path(local).toUri().toString()


def _partition_key(metadata, data_file) -> str | None:
    """A file's partition as a comparable string; None for an unpartitioned spec (applies everywhere)."""
    spec = metadata.specs()[data_file.spec_id]
    if not spec.fields:
        return None
    return f"{data_file.spec_id}:{tuple(data_file.partition)!r}"


def _with_file_columns(spark, metadata, df, files: list[LiveFile], prefix: str = ""):
    """``df`` (with Spark's file name in ``_PATH``) with each row's file: Iceberg's name of it, its
    sequence number and partition, looked up in literal maps (no Spark job, no join)."""
    from itertools import chain

    from pyspark.sql import functions as F

    names = [spark_path(spark, f.file.file_path) for f in files]

    def by_name(values):
        return F.create_map(*chain.from_iterable((F.lit(n), F.lit(v)) for n, v in zip(names, values)))[F.col(_PATH)]

    # a file Spark names otherwise than spark_path would keep rows its deletes remove: fail instead
    sequence = F.coalesce(by_name([f.sequence for f in files]).cast("long"), F.raise_error(F.concat(
        F.lit("Iceberg read: file "), F.col(_PATH), F.lit(" is not among the planned files (a path SeaTide names "
                                                          "otherwise than Spark); please report it"))).cast("long"))
    return df.select("*", by_name([f.file.file_path for f in files]).alias(prefix + _FILE),
                     sequence.alias(prefix + _SEQ),
                     by_name([_partition_key(metadata, f.file) for f in files]).cast("string").alias(prefix + _PART))


def _listed_by_the_driver(spark):
    """Spark lists more than 32 paths with a Spark job of its own (about a second on a small
    machine); the paths are files named by the manifests, so the driver lists them at once."""
    return session_conf(spark, "spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")


def read(spark, table, found: Plan, struct, only=None):
    """The rows of ``found``'s data files (or of the ``only`` ones among them) as a DataFrame of
    ``struct``'s columns, with every delete file of the plan applied."""
    data = found.data if only is None else [f for f in found.data if f.file.file_path in only]
    if not data:
        return spark.createDataFrame([], struct)
    with _listed_by_the_driver(spark):
        return _read(spark, table, found, data, struct)


def _read(spark, table, found: Plan, data: list[LiveFile], struct):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from seatide.connectors.iceberg.schema import spark_struct

    uris = [file_uri(local_path(f.file.file_path)) for f in data]
    if not found.deletes:
        return spark.read.schema(struct).parquet(*uris)
    metadata = table.metadata
    schema = metadata.schema()
    full = spark_struct(schema)
    groups: dict[tuple[int, ...], list[LiveFile]] = {}
    for f in found.equality_deletes:
        groups.setdefault(tuple(sorted(f.file.equality_ids or ())), []).append(f)
    keys = {schema.find_column_name(i) for ids in groups for i in ids}
    wanted = list(struct.names) + sorted(k for k in keys if k not in struct.names)
    read_struct = StructType([full[name] for name in wanted])
    rows = _with_file_columns(spark, metadata, spark.read.schema(read_struct).parquet(*uris).select(
        "*", F.col("_metadata.file_path").alias(_PATH), F.col("_metadata.row_index").alias(_POS)), data)
    for ids, files in groups.items():
        rows = _without_equality_deletes(spark, metadata, rows, [schema.find_column_name(i) for i in ids], files,
                                         full)
    if found.position_deletes:
        rows = _without_position_deletes(spark, metadata, rows, found.position_deletes)
    return rows.select(*struct.names)


def _without_equality_deletes(spark, metadata, rows, columns: list[str], files: list[LiveFile], full):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    aliases = [f"__seatide_d{i}" for i in range(len(columns))]
    keys = (spark.read.schema(StructType([full[c] for c in columns]))
            .parquet(*[file_uri(local_path(f.file.file_path)) for f in files])
            .select(*[F.col(c).alias(a) for c, a in zip(columns, aliases)], F.col("_metadata.file_path").alias(_PATH)))
    newest = (_with_file_columns(spark, metadata, keys, files, "d")
              .groupBy(*aliases, F.col("d" + _PART).alias("__seatide_dpart"))
              .agg(F.max("d" + _SEQ).alias("__seatide_dseq")))
    condition = [rows[c].eqNullSafe(newest[a]) for c, a in zip(columns, aliases)]
    condition.append(newest["__seatide_dpart"].isNull() | (newest["__seatide_dpart"] == rows[_PART]))
    condition.append(rows[_SEQ] < newest["__seatide_dseq"])
    return rows.join(newest, on=condition, how="left_anti")


def _without_position_deletes(spark, metadata, rows, files: list[LiveFile]):
    from pyspark.sql import functions as F

    deleted = _with_file_columns(spark, metadata, spark.read.schema("file_path string, pos long")
                                 .parquet(*[file_uri(local_path(f.file.file_path)) for f in files])
                                 .select(F.col("file_path").alias("__seatide_dfile"),
                                         F.col("pos").alias("__seatide_dpos"),
                                         F.col("_metadata.file_path").alias(_PATH)), files, "d")
    deleted = deleted.select("__seatide_dfile", "__seatide_dpos", F.col("d" + _SEQ).alias("__seatide_dseq"),
                             F.col("d" + _PART).alias("__seatide_dpart"))
    condition = [rows[_FILE] == deleted["__seatide_dfile"], rows[_POS] == deleted["__seatide_dpos"],
                 rows[_SEQ] <= deleted["__seatide_dseq"],
                 deleted["__seatide_dpart"].isNull() | (deleted["__seatide_dpart"] == rows[_PART])]
    return rows.join(deleted, on=condition, how="left_anti")


def read_snapshot(spark, table, snapshot_id: int | None, struct):
    """A snapshot's rows (``struct``'s columns), deletes applied."""
    return read(spark, table, plan(table, snapshot_id), struct)


__all__ = ["LiveFile", "Plan", "plan", "read", "read_snapshot", "spark_path"]
