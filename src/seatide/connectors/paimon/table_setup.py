"""A Paimon table made ready for a sink: created, its save modes planned and carried out, its
columns changed with a CDC source's tables.

* **RECREATE_SCHEMA** is planned as the table's ``identity`` and carried out in ``recreate``.
* **DROP_DATA** is planned as the newest snapshot then: carrying it out is one commit deleting the
  data files that snapshot held (those still live), under a commit user and identifier of its
  own, so it is made once, and rows written since (by another writer, or after a crash) stay.
* **ERROR_WHEN_DATA_EXISTS** refuses a table whose newest snapshot holds rows.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Callable

from seatide.connectors.paimon import commits
from seatide.connectors.paimon.arrow_types import arrow_schema
from seatide.connectors.paimon.warehouse import PaimonError, get_table
from seatide.plugin.evolution import ADD, DROP, RENAME, RETYPE, TableChange

log = logging.getLogger(__name__)


def identity(table) -> dict:
    """Where the table lives and when its first schema was written (a table created again differs)."""
    from pypaimon.schema.table_schema import TableSchema

    first = TableSchema.from_path(table.file_io, f"{table.table_path.rstrip('/')}/schema/schema-0")
    return {"path": table.table_path, "created": first.time_millis}


def has_rows(table) -> bool:
    return _rows_in(table.snapshot_manager().get_latest_snapshot())


def has_rows_at(file_io, path: str) -> bool:
    """The table whose directory is ``path`` (one renamed away: no catalog names it) holds rows; a
    read of its snapshots (``file_io``: its catalog's). No table there: False."""
    from pypaimon.snapshot.snapshot_manager import SnapshotManager

    return _rows_in(SnapshotManager(file_io, path).get_latest_snapshot())


def _rows_in(snapshot) -> bool:
    return snapshot is not None and (snapshot.total_record_count or 0) > 0


def create(catalog, database: str, name: str, struct, keys: list[str], partitions: list[str], props: dict) -> None:
    """Create the table for ``struct`` (a user's columns) unless it exists (another writer may race us)."""
    from pypaimon import Schema

    columns = {f.name for f in struct.fields}
    for option, wanted in (("paimon.table.primary-keys", keys), ("paimon.table.partition-keys", partitions)):
        missing = [k for k in wanted if k not in columns]
        if missing:
            raise PaimonError(f"Paimon sink: option '{option}' names {', '.join(missing)}, which the input does "
                              f"not have (fields: {', '.join(sorted(columns))})")
    if keys and not set(partitions) <= set(keys):
        raise PaimonError("Paimon sink: a primary-key table's partition columns must be among its keys: add "
                          f"{', '.join(sorted(set(partitions) - set(keys)))} to paimon.table.primary-keys")
    options = {str(k): str(v) for k, v in props.items()}
    if keys:
        options.setdefault("bucket", "1")        # a fixed bucket: pypaimon's dynamic buckets keep a hash index
    schema = Schema.from_pyarrow_schema(arrow_schema(struct, keys), partition_keys=partitions or None,
                                        primary_keys=keys or None, options=options)
    catalog.create_database(database, True)
    catalog.create_table(f"{database}.{name}", schema, True)
    log.info("Paimon sink: created table %s.%s (keys %s, partitions %s)", database, name, keys, partitions)


def drop_user(table, snapshot_id: int) -> str:
    """The commit user of DROP_DATA's commit of ``snapshot_id``'s files (one per table and snapshot)."""
    return "seatide-drop-" + hashlib.sha1(f"{table.table_path}@{snapshot_id}".encode()).hexdigest()[:16]


def drop_data(table, snapshot_id: int, fence: Callable[[], None]) -> None:
    """Delete the data files snapshot ``snapshot_id`` held that are still live (DROP_DATA); once."""
    from pypaimon.write.commit_message import CommitMessage

    user = drop_user(table, snapshot_id)
    if commits.committed(table, user, snapshot_id, snapshot_id) is not None:
        return
    live = {(tuple(p), b, f.file_name): f for p, b, f in _files(table)}
    held = {(tuple(p), b, f.file_name) for p, b, f in _files(table.copy({"scan.snapshot-id": str(snapshot_id)}))}
    by_bucket: dict[tuple, list] = {}
    for key in held & set(live):
        by_bucket.setdefault(key[:2], []).append(live[key])
    messages = [CommitMessage(partition=partition, bucket=bucket, new_files=[], deleted_files=files)
                for (partition, bucket), files in sorted(by_bucket.items(), key=repr)]
    fence()
    if commits.commit_once(table, user, snapshot_id, snapshot_id, messages):
        log.info("Paimon sink: DROP_DATA removed %d files of snapshot %d of %s", sum(len(f) for f in by_bucket.values()),
                 snapshot_id, table.identifier)


def _files(table):
    plan = table.new_read_builder().new_scan().plan()
    for split in plan.splits():
        for file in split.files:
            yield split.partition.values if hasattr(split.partition, "values") else split.partition, split.bucket, file


def evolve(catalog, database: str, name: str, change: TableChange, behaviour: str, column: Callable[[str], str],
           fence: Callable[[], None]) -> None:
    """Apply a CDC source's ``change`` as ``behaviour`` says (plugin/evolution.py), unless the table
    shows it applied already; ``column`` maps a source column to the table's name for it."""
    from pypaimon.schema.schema_change import SchemaChange

    table = get_table(catalog, database, name)
    if table is None:
        return                           # the save modes create it from the new shape
    existing = {f.name for f in table.table_schema.fields}
    evolving = behaviour in ("evolve", "try_evolve")
    steps = []
    target = column(change.column)
    if change.kind == ADD and behaviour != "ignore" and target not in existing:
        steps.append(SchemaChange.add_column(target, _paimon_type(change.field)))
    elif change.kind == DROP and evolving and target in existing:
        steps.append(SchemaChange.drop_column(target))
    elif change.kind == RENAME:
        new = column(change.new_name)
        if evolving and target in existing and new not in existing:
            steps.append(SchemaChange.rename_column(target, new))
        elif behaviour == "lenient" and new not in existing:
            steps.append(SchemaChange.add_column(new, _paimon_type(change.field)))
    elif change.kind == RETYPE and target in existing and (evolving or behaviour == "lenient" and change.widens()):
        steps.append(SchemaChange.update_column_type(target, _paimon_type(change.field), keep_nullability=True))
    if not steps:
        return
    fence()
    try:
        catalog.alter_table(f"{database}.{name}", steps, False)
    except Exception as exc:  # noqa: BLE001 - Paimon's own refusal, named below
        if behaviour == "try_evolve":
            log.warning("Paimon sink: %s.%s refused %s (%s); the table keeps its shape for it", database, name,
                        change.describe(), exc)
            return
        raise PaimonError(f"Paimon sink: table {database}.{name} refused the schema change {change.describe()}: "
                          f"{exc}") from None
    log.info("Paimon sink: %s.%s: %s", database, name, change.describe())


def _paimon_type(field):
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pyspark.sql.types import StructType

    return PyarrowFieldParser.to_paimon_type(arrow_schema(StructType([field])).field(0).type, True)


__all__ = ["create", "drop_data", "drop_user", "evolve", "has_rows", "has_rows_at", "identity"]
