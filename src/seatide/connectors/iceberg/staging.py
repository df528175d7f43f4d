"""Stage one target's batch, and turn a decided part into the files of its commit.

``stage``: Spark's executors write the batch's files into the batch's and attempt's own
directory under the table's data location, where no snapshot references them; the *part* (JSON,
what the runtime's decision records) names them:

    mode       append | copy-on-write | merge-on-read
    base       the branch head the batch was staged on (None: the branch was empty)
    base_sequence  the table's last sequence number then (``commits.committed_snapshot``)
    added      data files: the rows (appended or upserted); copy-on-write: the upserted rows and
               the rows of base's files holding a changed key, minus those keys
    removed    copy-on-write: those files of base
    keys       the batch's changed keys (keyed modes)
    equality_ids   merge-on-read: the key's field ids (the keys files become equality deletes)

``files_on``: the files of the commit on the branch head it will require. Appends and
merge-on-read deletes do not depend on the rows already there; a copy-on-write rewrite does, so
on a head other than its base (another writer committed in between) it is staged again from that
head, in a directory of that head's own: the upserted rows are the staged rows whose key is among
the part's keys (the others were kept from base), and the kept rows are read again from the
head's files. A rewrite read before another writer's delete never carries the deleted row past it.
"""

from __future__ import annotations

import os
import secrets

from seatide.connectors.iceberg import changes as cow
from seatide.connectors.iceberg import merge_on_read
from seatide.connectors.iceberg.commits import branch_head
from seatide.connectors.iceberg.datafiles import (IcebergWriteError, conform, describe, file_uri, local_path,
                                                  write_files)
from seatide.connectors.iceberg.schema import spark_struct
from seatide.connectors.iceberg.spec import IcebergSinkSpec
from seatide.plugin.rowkind import HIDDEN_COLUMNS

APPEND, COPY_ON_WRITE, MERGE_ON_READ = "append", "copy-on-write", "merge-on-read"


def stage(spark, spec: IcebergSinkSpec, table, df, directory: str) -> dict:
    """Write the batch ``df`` for ``table`` as loaded; its part (without the transaction id)."""
    metadata = table.metadata
    head = branch_head(metadata, spec.branch)
    part = {"mode": APPEND, "staging": directory, "base": head_id(head),
            "base_sequence": metadata.last_sequence_number if metadata.format_version >= 2 else None,
            "rows": 0, "added": [], "keys": [], "removed": [], "equality_ids": []}
    columns = partition_columns(metadata)
    if not spec.primary_keys:
        data = conform(df.drop(*HIDDEN_COLUMNS), metadata.schema(), spec.case_sensitive)
        added = describe(metadata, write_files(spark, data, metadata, directory, columns))
        return {**part, "rows": sum(f.record_count for f in added), "added": _paths(added)}
    keys = table_keys(spec, metadata)
    data = conform(df, metadata.schema(), spec.case_sensitive, keep=[c for c in HIDDEN_COLUMNS if c in df.columns])
    net = cow.net_changes(data, keys)
    try:
        if net.changes == 0:
            return part
        mor = merge_on_read.chosen(metadata.properties, spec.write_props)
        if mor:
            merge_on_read.check_partitions(columns, keys)
        pieces = max(1, min(spark.sparkContext.defaultParallelism, net.changes // 1_000_000 + 1))
        changed = _with_rows(write_files(spark, net.keys.coalesce(pieces), metadata, os.path.join(directory, "keys"),
                                         columns if mor else []))
        part.update(rows=net.changes, keys=changed)
        if mor:
            rows = describe(metadata, write_files(spark, net.upserts.coalesce(pieces), metadata,
                                                  os.path.join(directory, "rows"), columns))
            return {**part, "mode": MERGE_ON_READ, "added": _paths(rows),
                    "equality_ids": [metadata.schema().find_field(k).field_id for k in keys]}
        removed, added = _rewrite(spark, spec, table, head, keys, net.keys, net.upserts,
                                  os.path.join(directory, "rows"))
        return {**part, "mode": COPY_ON_WRITE, "added": added, "removed": [f.file_path for f in removed]}
    finally:
        net.net.unpersist()


def files_on(spark, spec: IcebergSinkSpec, table, part: dict) -> tuple[list, list]:
    """(added DataFiles, removed DataFiles or paths) committing ``part`` on the branch head of
    ``table`` as loaded. ``FileNotFoundError`` when a staged file is gone."""
    metadata = table.metadata
    head = branch_head(metadata, spec.branch)
    added = describe(metadata, part["added"])
    mode = part.get("mode")
    if mode is None:                   # decided by SeaTide before parts named their mode
        return _as_decided_before(table, head, part, added)
    if mode == APPEND:
        return added, []
    if mode == MERGE_ON_READ:
        if _has_rows(head):
            added += describe(metadata, part["keys"], equality_ids=part["equality_ids"])
        return added, []
    if head_id(head) == part["base"]:
        return added, part["removed"]
    keys = table_keys(spec, metadata)
    struct = spark_struct(metadata.schema())
    changed = spark.read.parquet(*[file_uri(p) for p in part["keys"]]).select(*keys)
    staged = (spark.read.schema(struct).parquet(*[file_uri(p) for p in part["added"]]) if part["added"]
              else spark.createDataFrame([], struct))
    upserts = staged.join(changed, on=keys, how="left_semi")
    # A directory of this call's own: two drivers may publish one decided part at once (a zombie
    # and its replacement rolling it forward), each on the head it loaded; ``write_files`` empties
    # its directory first, so a shared ``rows-<head>`` let the second delete the files the first
    # had just committed from it. What a call staged and did not commit goes with the committing
    # publish's clean-up (``Target._drop_unused``: every file of the part's staging no snapshot took).
    directory = os.path.join(part["staging"], f"rows-{head_id(head)}-{secrets.token_hex(6)}")
    removed, rewritten = _rewrite(spark, spec, table, head, keys, changed, upserts, directory)
    return describe(metadata, rewritten), removed


def _rewrite(spark, spec: IcebergSinkSpec, table, head, keys: list[str], changed, upserts, directory: str):
    """(the head's files holding a changed key, the paths of their rows without the changed keys
    plus the ``upserts``, written to ``directory``)."""
    metadata = table.metadata
    struct = spark_struct(metadata.schema())
    candidates = cow.candidate_files(table, head, keys, changed, spec.case_sensitive)
    affected = cow.affected_files(spark, [f.file for f in candidates.data], keys, changed, struct)
    rows = upserts.select(*struct.names)
    if affected:
        rows = cow.kept_rows(spark, table, candidates, affected, keys, changed, struct).unionByName(rows)
    # The key shuffle leaves spark.sql.shuffle.partitions pieces: as many files as the batch
    # rewrote (plus one for new keys) is enough, and keeps small batches from adding many files.
    rows = rows.coalesce(max(1, min(len(affected) + 1, spark.sparkContext.defaultParallelism)))
    written = write_files(spark, rows, metadata, directory, partition_columns(metadata))
    return affected, _paths(describe(metadata, written))


def _as_decided_before(table, head, part: dict, added: list) -> tuple[list, list]:
    """A part of the earlier form: its files committed as decided (the removed ones must be live)."""
    if part.get("equality_deletes"):
        added += describe(table.metadata, part["equality_deletes"], equality_ids=part["equality_ids"])
    return added, part["removed"]


def _with_rows(paths: list[str]) -> list[str]:
    """``paths`` without the files that hold no row (deleted: no commit would take them)."""
    import pyarrow.parquet as pq

    kept = []
    for path in paths:
        if pq.read_metadata(path).num_rows:
            kept.append(path)
        else:
            os.remove(path)
    return kept


def _has_rows(head) -> bool:
    return head is not None and (head.summary is None or head.summary.additional_properties.get("total-records") != "0")


def head_id(head) -> int | None:
    return head.snapshot_id if head is not None else None


def _paths(files: list) -> list[str]:
    return [local_path(f.file_path) for f in files]


def partition_columns(metadata) -> list[str]:
    schema, columns = metadata.schema(), []
    for field in metadata.spec().fields:
        if not field.transform.preserves_order:
            raise IcebergWriteError(f"the table is partitioned by {field.transform}({field.name}); SeaTide "
                                    "writes tables partitioned by identity or time transforms only")
        columns.append(schema.find_column_name(field.source_id))
    return columns


def table_keys(spec: IcebergSinkSpec, metadata) -> list[str]:
    schema = metadata.schema()
    names = {spec.column(f.name): f.name for f in schema.fields}
    keys = []
    for key in spec.primary_keys:
        found = names.get(spec.column(key))
        if found is None:
            raise IcebergWriteError(f"iceberg.table.primary-keys names {key}, which the table does not have "
                                    f"(columns: {', '.join(f.name for f in schema.fields)})")
        keys.append(found)
    return keys


__all__ = ["APPEND", "COPY_ON_WRITE", "MERGE_ON_READ", "files_on", "head_id", "partition_columns", "stage",
           "table_keys"]
