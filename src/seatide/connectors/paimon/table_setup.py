"""A Paimon table made ready for a sink: created, its save modes planned and carried out, its
columns changed with a CDC source's tables.

* **RECREATE_SCHEMA** is planned as the table's identity (where it lives and when its first
  schema was written): carrying it out drops the table only while it is still that table, by one
  rename onto a tombstone named by that identity (``drop_if_same``), so a zombie that carries out
  the decision late, even one paused between its check and its drop, never drops the table its
  replacement created since.
* **DROP_DATA** is planned as the newest snapshot then: carrying it out is one commit deleting the
  data files that snapshot held (those still live), under a commit user and identifier of its
  own, so it is made once, and rows written since (by another writer, or after a crash) stay.
* **ERROR_WHEN_DATA_EXISTS** refuses a table whose newest snapshot holds rows.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
from typing import Callable
from urllib.parse import urlparse

from seatide import failpoints
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
    snapshot = table.snapshot_manager().get_latest_snapshot()
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
    _refuse_beside_a_table_set_aside(catalog, database, name)
    options = {str(k): str(v) for k, v in props.items()}
    if keys:
        options.setdefault("bucket", "1")        # a fixed bucket: pypaimon's dynamic buckets keep a hash index
    schema = Schema.from_pyarrow_schema(arrow_schema(struct, keys), partition_keys=partitions or None,
                                        primary_keys=keys or None, options=options)
    catalog.create_database(database, True)
    catalog.create_table(f"{database}.{name}", schema, True)
    log.info("Paimon sink: created table %s.%s (keys %s, partitions %s)", database, name, keys, partitions)


def drop_if_same(catalog, database: str, name: str, decided: dict, fence: Callable[[], None],
                 owed: Callable[[Callable[[dict], bool]], bool] | None = None) -> None:
    """Drop the table when it is still the decided one (RECREATE_SCHEMA); idempotent, and at most
    once per decided table. pypaimon drops whatever table has the name, so a check followed by a
    drop let a zombie that checked, then paused, drop the table its replacement had recreated since,
    with its committed batches. The drop is a rename of the table's directory onto a tombstone named
    by the decided identity, which is never empty again (a marker stays): the first rename wins,
    any later one fails, whatever table has the name by then.

    The decided table still there means the decision was never carried out: its decider died first.
    Carried out late, the drop would take every row committed since, by a fresh start (a scope of
    its own) that kept the table: ``owed(carried_out)`` (the door's, ``Target.destroy_owed``) is
    asked before the rename, which skips it (False: a later decision of another scope emptied the
    table, ``carried_out`` says) or refuses it over kept rows (raises), and again once the table is
    renamed away (no batch can be committed into it then): a batch decided in between is seen, the
    table is put back and nothing is destroyed (outside review, B3).

    While it is renamed away its name is free: SeaTide makes no table there while the tombstone is
    not marked dropped (``create``), and a carrier whose driver died before its second look left it
    so: the next one puts it back first and asks again. A table made there anyway (outside SeaTide,
    or in the instant between ``create``'s look and its making) keeps the tombstone from being put
    back: refused, naming the tombstone that holds the rows (outside review of 12e88ea)."""
    path = _local(decided["path"])
    tombstone = _tombstone(path, decided["created"])
    if _set_aside(tombstone) and _created(tombstone) == decided["created"]:
        _put_back(tombstone, path, f"{database}.{name}")        # its carrier died before its second look
    table = get_table(catalog, database, name)
    if table is None or identity(table) != decided:
        return
    carried_out = _CarriedOut(table)
    if owed is not None and not owed(carried_out):
        log.info("Paimon sink: %s.%s: RECREATE_SCHEMA decided and never carried out is skipped: a later decision "
                 "emptied the table since", database, name)
        return
    carried_out.frozen = True
    fence()
    failpoints.hit("paimon.before_drop")
    try:
        os.rename(path, tombstone)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            return          # dropped by whoever carried the decision out first, or no table there
        raise
    failpoints.hit("paimon.renamed")
    label = f"{database}.{name}"
    if _created(tombstone) != decided["created"]:
        _put_back(tombstone, path, label)   # not the decided table (one made outside SeaTide since the check)
        return
    try:
        still = owed is None or owed(carried_out)
    except BaseException:
        _put_back(tombstone, path, label)
        raise
    if not still:
        _put_back(tombstone, path, label)
        return
    open(os.path.join(tombstone, _DROPPED), "w").close()     # the tombstone stays, never empty
    for entry in os.listdir(tombstone):
        if entry != _DROPPED:
            shutil.rmtree(os.path.join(tombstone, entry), ignore_errors=True)
    log.info("Paimon sink: dropped table %s.%s (RECREATE_SCHEMA)", database, name)


_DROPPED = "dropped-by-seatide"    # the marker file that keeps a tombstone non-empty


def _tombstone(path: str, created) -> str:
    """Where RECREATE_SCHEMA renames the table of ``path`` first written at ``created``."""
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.recreated-{created}")


def _set_aside(tombstone: str) -> bool:
    """A tombstone holding a table not dropped yet: renamed away, its second look not done."""
    return os.path.isdir(tombstone) and not os.path.exists(os.path.join(tombstone, _DROPPED))


def _put_back(tombstone: str, path: str, label: str) -> None:
    """The table renamed to ``tombstone`` back to ``path``; refused, with how to restore it, when a
    table was made there since (its rows and the tombstone's are both committed)."""
    try:
        os.rename(tombstone, path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not os.path.exists(tombstone):
            return          # put back by another carrier of the decision
        raise PaimonError(
            f"Paimon sink: table {label}: a RECREATE_SCHEMA carried out late renamed it to {tombstone} and was "
            f"refused (or its driver died before it looked again), but a table was made at {path} since, so it "
            f"cannot be put back ({exc.strerror}). Nothing was deleted: the rows committed before are in "
            f"{tombstone}. Restore them: stop the jobs writing {label}, move {path} aside, rename {tombstone} to "
            f"{path}, then write the moved table's rows into it again (or drop them if unwanted)") from None


class TableSetAside(RuntimeError):
    """No table is made where a RECREATE_SCHEMA renamed one away: not a PermanentError, the job's retry
    comes back once that step put it back or dropped it (its carrier's second look is short)."""


def _refuse_beside_a_table_set_aside(catalog, database: str, name: str) -> None:
    """Refuse to make a table where a RECREATE_SCHEMA renamed one away and has not dropped it: made
    now, it would keep that table (its committed rows) from being put back."""
    from pypaimon.common.identifier import Identifier

    path = _local(catalog.get_table_path(Identifier.from_string(f"{database}.{name}")))
    prefix = f".{os.path.basename(path)}.recreated-"
    parent = os.path.dirname(path)
    aside = [os.path.join(parent, e) for e in (os.listdir(parent) if os.path.isdir(parent) else [])
             if e.startswith(prefix) and _set_aside(os.path.join(parent, e))]
    if aside:
        raise TableSetAside(
            f"Paimon sink: table {database}.{name} is renamed to {aside[0]} by a RECREATE_SCHEMA that asks whether "
            f"it may drop it, or whose driver died before it looked again (its next attempt puts it back and asks "
            f"again); no table is made at {path} meanwhile, which would keep it from being put back. Run again "
            f"once that job's step is done, or rename {aside[0]} back to {path} if that job is gone")


def _local(path: str) -> str:
    return urlparse(path).path if "://" in path or path.startswith("file:") else path


def _created(table_dir: str) -> int | None:
    """When the first schema of the table in ``table_dir`` was written (None: no table there)."""
    try:
        with open(os.path.join(table_dir, "schema", "schema-0")) as f:
            return json.load(f).get("timeMillis")
    except (OSError, ValueError):
        return None


class _CarriedOut:
    """Whether a later save-mode plan of a table's target (``owed_destroy.later_destroys``) was carried
    out on it: a RECREATE_SCHEMA's decided table is not this one (it was dropped), a DROP_DATA's
    commit is in its snapshots. Looked at while the table is in place; once it is renamed away
    (``frozen``) a plan not looked at counts as not carried out (refusing wrongly costs a new job,
    skipping wrongly loses rows)."""

    def __init__(self, table):
        self.table, self.answers, self.frozen = table, {}, False

    def __call__(self, plan: dict) -> bool:
        key = json.dumps(plan, sort_keys=True, default=str)
        if key not in self.answers and not self.frozen:
            if "recreate" in plan:
                self.answers[key] = plan["recreate"] != identity(self.table)
            elif isinstance(plan.get("drop_data"), int):
                sid = plan["drop_data"]
                self.answers[key] = commits.committed(self.table, _drop_user(self.table, sid), sid, sid) is not None
        return self.answers.get(key, False)


def _drop_user(table, snapshot_id: int) -> str:
    """The commit user of DROP_DATA's commit of ``snapshot_id``'s files (one per table and snapshot)."""
    return "seatide-drop-" + hashlib.sha1(f"{table.table_path}@{snapshot_id}".encode()).hexdigest()[:16]


def drop_data(table, snapshot_id: int, fence: Callable[[], None]) -> None:
    """Delete the data files snapshot ``snapshot_id`` held that are still live (DROP_DATA); once."""
    from pypaimon.write.commit_message import CommitMessage

    user = _drop_user(table, snapshot_id)
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


__all__ = ["TableSetAside", "create", "drop_data", "drop_if_same", "evolve", "has_rows", "identity"]
