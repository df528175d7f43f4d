"""Changes applied to an Iceberg table by key, merge-on-read: equality deletes, as Flink writes them.

Chosen by Iceberg's own table properties, as Spark and Flink users set them: the table applies
changes merge-on-read when ``write.upsert.mode``, ``write.update.mode`` or
``write.delete.mode`` is ``merge-on-read`` (in ``iceberg.table.write-props`` or on the table);
a micro-batch's changes go one way, so any of them chooses it. Default: copy-on-write.

For one micro-batch, after ``changes.net_changes`` (the last change per key wins):

* Spark's executors write the upserted rows (inserts, updates' after-images) as data files;
* and the key columns of **every** changed key as equality-delete files (``equality_ids`` = the
  key's field ids), in the same snapshot. An equality delete applies to data files with a
  strictly lower data sequence number (Iceberg's spec), so it removes the key's older rows and
  spares the row added beside it; a deleted key simply has no new row.

Nothing already in the table is read or rewritten: a batch costs what it changes, whatever the
table's size; readers pay instead, applying the deletes (``deletes.read``), until a compaction
(``maintenance.rewrite_small_files``) folds them into the data files. On a partitioned table the
partition columns must be key columns (as Flink requires in upsert mode): a delete file lives in
one partition, so a key's delete must land where its old rows are.

The files do not depend on the table's rows, so a decided batch is committed as staged on any
branch head (deletes are relative: they apply to whatever older rows hold the keys, another
writer's too). Only whether the deletes go in depends on the head: on a branch without rows (the
first batch of a sync) there is nothing to delete, and they are left out; that is decided at the
commit, on the head the commit requires (``staging.files_on``).
"""

from __future__ import annotations

from seatide.connectors.iceberg.datafiles import IcebergWriteError

MODE_PROPERTIES = ("write.upsert.mode", "write.update.mode", "write.delete.mode")
MODES = ("copy-on-write", "merge-on-read")


def chosen(table_properties: dict, write_props: dict) -> bool:
    """Whether changes are applied merge-on-read (``write_props`` over the table's own properties)."""
    props = {**table_properties, **write_props}
    return any(str(props.get(key, "copy-on-write")).lower() == "merge-on-read" for key in MODE_PROPERTIES)


def check_partitions(partition_columns: list[str], keys: list[str]) -> None:
    outside = [c for c in partition_columns if c not in keys]
    if outside:
        raise IcebergWriteError(f"the table is partitioned by {', '.join(outside)}, which is not a primary-key "
                                "column: merge-on-read writes a key's equality delete into one partition, so the "
                                "partition columns must be key columns (as Flink's upsert mode requires); add them "
                                "to iceberg.table.primary-keys or apply changes copy-on-write")


__all__ = ["MODES", "MODE_PROPERTIES", "check_partitions", "chosen"]
