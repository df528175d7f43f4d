"""Changes (inserts, updates, deletes) applied to an Iceberg table by key, copy-on-write.

For one micro-batch:

1. The net change per key: the batch's last change of each key wins, by the source's order
   (``__row_seq``), which the source numbers across all its tables: one key moved between shards
   merged into this table is ordered by it too, whatever order the rows arrive in. Two changes of
   one key with the same number cannot be ordered (a source numbering its tables apart) and fail
   the batch. A key whose last change is an insert or an update's after-image is upserted, one
   whose last change is a delete or an update's before-image (the key moved) is deleted.
2. Candidate files: the branch head's data files whose key bounds may hold a changed key
   (Iceberg's metrics prune the rest without opening them).
3. Affected files: Spark reads the key columns of the candidates and keeps the files that
   really hold a changed key. Only these are rewritten.
4. Spark's executors write the affected files' rows minus the changed keys (the kept rows), and
   the upserted rows, as new files; the snapshot removes the affected files and adds the new ones.

Readers of any engine see a plain table (no delete files), at the cost of rewriting every
file a batch touches (docs/connectors/iceberg.md has the measurements). A table that holds
delete files (merge-on-read, by SeaTide or another engine) keeps them: a rewritten file's rows
are read with its deletes applied, and the new file's higher sequence number puts it out of
their reach. ``merge_on_read`` is the other way to apply a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from seatide.connectors.iceberg.datafiles import IcebergWriteError, file_uri, local_path
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind

_SEQ = "__seatide_seq"
_RANK = "__seatide_rank"
_NEXT = "__seatide_next"     # the key's change before its last one, by the source's order
_FILE = "__seatide_file"
# Up to this many changed keys are named one by one in the scan's filter; past it, their range.
_IN_LIST_MAX = 2_000


@dataclass
class NetChanges:
    net: object            # DataFrame, persisted: one row per changed key, its last change (unpersist it)
    keys: object           # DataFrame: the changed keys
    upserts: object        # DataFrame: the rows to write (no kind column)
    changes: int           # rows of the batch


def net_changes(df, keys: list[str]) -> NetChanges:
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # the source's order when a transform may have reordered the rows (runtime.change_order),
    # else the order they are read in, which is the source's
    numbered = ROW_SEQ_COLUMN in df.columns
    seq = F.col(ROW_SEQ_COLUMN) if numbered else F.monotonically_increasing_id()
    ordered = df.withColumn(_SEQ, seq).drop(ROW_SEQ_COLUMN)
    window = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(F.col(_SEQ).desc())
    cached = (ordered.withColumn(_RANK, F.row_number().over(window)).withColumn(_NEXT, F.lead(_SEQ).over(window))
              .filter(F.col(_RANK) == 1).drop(_RANK).persist(StorageLevel.MEMORY_AND_DISK))
    tie = F.col(_NEXT) == F.col(_SEQ)
    changes, ties = cached.agg(F.count(F.lit(1)), F.count(F.when(tie, 1))).first()
    if ties:
        example = cached.filter(tie).select(*keys, _SEQ).first()
        cached.unpersist()
        where = ", ".join(f"{k} = {example[k]!r}" for k in keys)
        raise IcebergWriteError(
            f"changes of one key ({where}) share {ROW_SEQ_COLUMN} {example[_SEQ]} ({ties} such keys in the batch), "
            "so which came last is unknown: the source numbers the changes of the tables written into this "
            "table apart (shards merged into one table), and they cannot be ordered against each other. Write "
            "each source table into a table of its own, or read them with a source whose order spans its tables")
    net = cached.drop(_SEQ, _NEXT)
    upsert_kinds = [int(RowKind.INSERT), int(RowKind.UPDATE_AFTER)]
    upserts = net.filter(F.col(ROW_KIND_COLUMN).isin(upsert_kinds)).drop(ROW_KIND_COLUMN)
    return NetChanges(net=cached, keys=net.select(*keys), upserts=upserts, changes=int(changes))


def candidate_files(table, snapshot, keys: list[str], changed, case_sensitive: bool):
    """The snapshot's data files that may hold one of the ``changed`` keys (by their bounds), with
    every delete file (``deletes.Plan``: a rewritten file's rows are read with its deletes applied)."""
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, In, LessThanOrEqual

    from seatide.connectors.iceberg.deletes import Plan, plan

    if snapshot is None:
        return Plan()
    expression = AlwaysTrue()
    if len(keys) == 1:
        key = keys[0]
        values = [r[0] for r in changed.limit(_IN_LIST_MAX + 1).collect()]
        if len(values) <= _IN_LIST_MAX:
            expression = In(key, [v for v in values if v is not None]) if values else AlwaysTrue()
        else:
            from pyspark.sql import functions as F

            low, high = changed.agg(F.min(key), F.max(key)).first()
            expression = And(GreaterThanOrEqual(key, low), LessThanOrEqual(key, high))
        if any(v is None for v in values):     # a NULL key: no bound excludes a file
            expression = AlwaysTrue()
    return plan(table, snapshot.snapshot_id, expression, case_sensitive)


def affected_files(spark, candidates: list, keys: list[str], changed, struct) -> list:
    """The candidates that hold at least one changed key (read: their key columns only)."""
    from pyspark.sql import functions as F

    if not candidates:
        return []
    from seatide.connectors.iceberg.deletes import spark_path

    by_name = {spark_path(spark, f.file_path): f for f in candidates}     # as Spark names them (escaped)
    key_struct = type(struct)([struct[k] for k in keys])
    found = (spark.read.schema(key_struct).parquet(*[file_uri(local_path(f.file_path)) for f in candidates])
             .select(*keys, F.col("_metadata.file_path").alias(_FILE))
             .join(changed.distinct(), on=keys, how="left_semi").select(_FILE).distinct().collect())
    return [by_name[r[0]] for r in found]


def kept_rows(spark, table, candidates, affected: list, keys: list[str], changed, struct):
    """The affected files' rows (their deletes applied) without the changed keys."""
    from seatide.connectors.iceberg.deletes import read

    return (read(spark, table, candidates, struct, only={f.file_path for f in affected})
            .join(changed.distinct(), on=keys, how="left_anti"))


__all__ = ["NetChanges", "affected_files", "candidate_files", "kept_rows", "net_changes"]
