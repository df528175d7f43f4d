"""One route's rows of a batch as files in a staging directory, each with its final name fixed.

Spark writes the rows into a directory of the staging area (``paths.STAGING_DIR``, hidden from
readers, on the output's filesystem); the files are then listed in a stable order and each gets
the name it will have in the output (``<transaction id>_<n><ext>``, or ``file_name_expression``),
so a replay of the batch names them alike. ``target.py`` decides where the staging is and when
the files move.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from typing import Callable

from seatide.connectors.file import formats
from seatide.connectors.file.errors import LocalFileError
from seatide.connectors.file.naming import partition_text
from seatide.connectors.file.paths import is_hidden, spark_uri
from seatide.connectors.file.spec import FileSinkSpec
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.types import map_keys_as

PARTITION_ALIAS = "__seatide_p"   # Spark partitions by these copies; names map back to fields


def column(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def stage_rows(spec: FileSinkSpec, df, staging: str) -> tuple[int, list[str]]:
    """Write ``df`` (the route's rows; the row kind is dropped here) into ``staging``: its row count,
    and the columns written (``final_names`` takes them)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    prepared = _prepare(spec, df)
    if spec.file_format in ("parquet", "orc"):
        # Their footers hold exact row counts: counting while writing would cost a
        # per-row aggregation (~10% of a 10M-row write).
        _spark_write(spec, prepared, staging)
        return _footer_rows(spec, staging), prepared.columns
    observation = Observation(f"seatide_file_rows_{uuid.uuid4().hex}")
    _spark_write(spec, prepared.observe(observation, F.count(F.lit(1)).alias("rows")), staging)
    return int(observation.get["rows"]), prepared.columns


def final_names(spec: FileSinkSpec, staging: str, transaction_id: str, rows: int, columns: list[str],
                target_dir: Callable[[str], str]) -> list[tuple[str, str]]:
    """(staged file, final path) pairs, in a stable order; none for an empty batch by default.
    ``columns``: the staged frame's (a header's size); ``target_dir``: a partition directory's
    place in the output, from its staged relative path."""
    staged = staged_files(staging)
    if rows == 0:
        staged = staged[:1] if spec.empty_file_when_no_data else []
    else:   # Spark writes a file for every task, even one that got no rows
        header = _header_bytes(spec, columns)
        staged = [f for f in staged if not _without_rows(spec, os.path.join(staging, *f), header)]
    base = spec.namer.base(transaction_id, datetime.now())
    moves = []
    for index, (relative_dir, name) in enumerate(staged):
        suffix = formats.final_suffix(spec.file_format, name, spec.extension)
        moves.append((os.path.join(staging, relative_dir, name),
                      os.path.join(target_dir(relative_dir), f"{base}_{index}{suffix}")))
    return moves


def staged_files(staging: str) -> list[tuple[str, str]]:
    found = []
    for directory, dirs, files in os.walk(staging):
        dirs[:] = sorted(d for d in dirs if d.startswith(PARTITION_ALIAS) or not is_hidden(d))
        relative = os.path.relpath(directory, staging)
        found.extend(("" if relative == "." else relative, f) for f in files if not is_hidden(f))
    return sorted(found)


def _prepare(spec: FileSinkSpec, df):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = df.drop(ROW_KIND_COLUMN)
    columns = list(spec.sink_columns or df.columns)
    for option, names in (("sink_columns", columns), ("partition_by", spec.partition_by)):
        missing = [c for c in names if c not in df.columns]
        if missing:
            raise LocalFileError(f"LocalFile sink: {option} names {', '.join(missing)}, which the "
                                 f"input does not have (fields: {', '.join(df.columns)})")
    kept = [c for c in columns if spec.partition_fields_in_file or c not in spec.partition_by]
    types = {f.name: f.dataType for f in df.schema.fields}
    data = []
    for name in kept:
        value, kind = column(name), types[name]
        if isinstance(kind, T.NullType):
            # No file format stores Spark's VOID; a string column holds the same nulls.
            value = value.cast("string")
        if spec.file_format in ("text", "csv", "json"):     # JSON's keys are text (plugin.types)
            value = map_keys_as(value, kind, to_text=True)
        if spec.file_format in ("text", "csv"):   # Spark's CSV writer takes no nested values
            if isinstance(kind, (T.ArrayType, T.MapType, T.StructType)):
                value = F.to_json(value)
            elif isinstance(kind, T.BinaryType):
                value = F.base64(value)
        data.append(value.alias(name))
    aliases = [partition_text(column(k), types[k]).alias(f"{PARTITION_ALIAS}{i}")
               for i, k in enumerate(spec.partition_by)]
    out = df.select(*data, *aliases)
    return out.coalesce(1) if spec.single_file else out


def _header_bytes(spec: FileSinkSpec, columns: list[str]) -> int:
    """Bytes of a header line: a file no bigger holds no rows."""
    options = spec.spark_options
    if options.get("header") != "true":
        return 0
    names = [c for c in columns if not c.startswith(PARTITION_ALIAS)]
    line = options["sep"].join(names) + options["lineSep"]   # unquoted: never more than Spark's
    return len(line.encode(options["encoding"]))


def _spark_write(spec: FileSinkSpec, df, staging: str) -> None:
    writer = df.write.mode("overwrite").options(**spec.spark_options)
    if spec.partition_by:
        writer = writer.partitionBy(*[f"{PARTITION_ALIAS}{i}" for i in range(len(spec.partition_by))])
    writer.format(formats.SPARK_FORMAT[spec.file_format]).save(spark_uri(staging))


def _footer_rows(spec: FileSinkSpec, staging: str) -> int:
    total = 0
    for relative_dir, name in staged_files(staging):
        path = os.path.join(staging, relative_dir, name)
        if spec.file_format == "parquet":
            import pyarrow.parquet as pq
            total += pq.read_metadata(path).num_rows
        else:
            import pyarrow.orc as orc
            total += orc.ORCFile(path).nrows
    return total


def _without_rows(spec: FileSinkSpec, path: str, header_size: int) -> bool:
    """True for a staged file that certainly holds no rows (unsure: False)."""
    fmt = spec.file_format
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_metadata(path).num_rows == 0
    if fmt == "orc":
        import pyarrow.orc as orc

        return orc.ORCFile(path).nrows == 0
    if spec.spark_options.get("compression", "none") != "none":
        return False
    return os.path.getsize(path) <= header_size


__all__ = ["PARTITION_ALIAS", "column", "final_names", "stage_rows", "staged_files"]
