"""One Iceberg table a sink writes (a *target*), and its steps in the one sink protocol
(``plugin.sink_protocol``, decided in the store).

Routes (source tables) whose options name the same Iceberg table are one target (``targets``);
a single-table sink has one target of one route. For each batch:

1. **Prepare**, once per target, before its first rows of the run: its save modes pass the
   protocol's door (``save_mode_plan``, ``destroy``: ``table_setup``), then ``ensure`` makes
   namespace and table (a missing branch is made by its first commit).
2. **Stage** (``staging.stage``): Spark's executors write the target's files (every route's rows
   together, one key's changes ordered by ``__row_seq`` across them) where no snapshot references
   them; the part names them, with the branch head they were staged on.
3. **Decide**: the runtime records ONE fenced decision holding every target's part. A zombie
   driver decides nothing, so it commits nothing.
4. **Publish** (``publish``): one snapshot of the part on the branch head, its summary carrying
   the batch's transaction id (the same id in every table of the batch), required to sit on the
   head it was built for; a head another writer moved has the part's rewrite staged again for it
   (``staging.files_on``). Idempotent: a batch whose mark is found (``commits.committed_snapshot``)
   commits nothing, so any later attempt rolls a decided batch forward and every row lands once.

A target's state after a batch: ``{"rows", "total_rows"}``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Callable

from seatide import failpoints
from seatide.connectors.iceberg.catalogs import load_catalog, looking_at
from seatide.connectors.iceberg.commits import (COMMIT_ATTEMPTS, STAGING_KEY, TRANSACTION_KEY, MarkLost, backoff,
                                                commit_snapshot, committed_snapshot)
from seatide.connectors.iceberg.datafiles import IcebergWriteError, data_root, local_path, staging_dir
from seatide.connectors.iceberg.keys import hashed_key, landed_key, located_key, named_key
from seatide.connectors.iceberg.schema import UnsupportedIcebergType
from seatide.connectors.iceberg.spec import IcebergSinkError, IcebergSinkSpec
from seatide.connectors.iceberg.staging import files_on, stage
from seatide.connectors.iceberg import table_setup
from seatide.connectors.iceberg.table_setup import evolve
from seatide.plugin.base import Batch, SinkContext, StagedBatch
from seatide.plugin.rowkind import HIDDEN_COLUMNS
from seatide.plugin.sink_protocol import Target, TargetRows
from seatide.plugin.sink_targets import modes_destroy
from seatide.plugin.tables import TableRoute

log = logging.getLogger(__name__)


class IcebergTarget(Target):
    def __init__(self, key: str, routes: list[TableRoute], spec: IcebergSinkSpec, ctx: SinkContext,
                 spellings: list[IcebergSinkSpec] | None = None):
        super().__init__(key, routes)
        self.spec = spec
        self.spark = ctx.spark
        self.sink_key = f"{ctx.pipeline_id}-{ctx.plugin_id}"     # names its staging (and an older SeaTide's)
        self.run = ctx.job_id             # the job run, which its batches' transaction ids name
        self.name = spec.name             # namespace.table: how messages (and states before targets) name it
        self.identifier = (spec.namespace, spec.table)
        self.save_modes = spec.schema_save_mode == "RECREATE_SCHEMA" or spec.data_save_mode != "APPEND_DATA"
        self.destroys = modes_destroy(spec.schema_save_mode, spec.data_save_mode)
        self.refuses_ahead = spec.schema_save_mode in ("IGNORE", "ERROR_WHEN_SCHEMA_NOT_EXIST")   # a missing table
        # the options the job's routes writing the table spell it with (``IcebergTargets._spellings``)
        self.spellings = spellings or [r.sink.spec() for r in routes]
        # the door's decisions of the versions that kept a hadoop or REST catalog's label in the key,
        # that kept a warehouse path or SQL address as written (review N8), and that hashed a hadoop
        # warehouse's location (review 8b)
        earlier = [k for spec in self.spellings for k in (hashed_key(spec), landed_key(spec), located_key(spec))]
        self.earlier_keys = [k for k in dict.fromkeys(earlier) if k != key]
        self._catalog = None
        self._waiting: dict | None = None     # a recreate decided without the input's fields
        self._ready = False                   # the table is there (ensured)
        self._commits = 0

    @property
    def catalog(self):
        if self._catalog is None:
            self._catalog = load_catalog(self.spec.catalog_name, self.spec.catalog_config)
        return self._catalog

    # -- prepare ------------------------------------------------------------------------------
    def earlier_decision(self, door) -> dict | None:
        """A decision recorded under a key before it named the catalog's location (``keys.named_key``,
        as the job's routes spell it): the door's own shape (the port), or the writer's before it."""
        for name in dict.fromkeys(door.key_of(named_key(spec)) for spec in self.spellings):
            record = door.records.recorded_once(name)
            if record is not None and "destroy" in record:
                return record
            drop_data = door.records.recorded_once(name + "_data")
            if record is not None or drop_data is not None:
                return {"target": self.key, "destroy": table_setup.earlier_plan(record, drop_data, name)}
        return None

    def save_mode_plan(self, schema) -> dict | None:
        return table_setup.save_mode_plan(self.catalog, self.spec, _fields(schema), self.run)

    def check_save_modes(self, schema) -> None:
        """A look that changes nothing in the catalog either (``catalogs.looking_at``: a SQL catalog
        not made yet holds no table, and is not made by looking)."""
        if self._catalog is not None:
            table_setup.check_save_modes(self._catalog, self.spec, self.run)
            return
        with looking_at(self.spec.catalog_name, self.spec.catalog_config) as catalog:
            if catalog is None:
                table_setup.refuse_missing(self.spec)
            else:
                table_setup.check_save_modes(catalog, self.spec, self.run)

    def destroy(self, plan: dict, fence: Callable[[], None]) -> None:
        # no fence: each step is one commit conditional on what the plan names, idempotent
        self._waiting = None if table_setup.destroy(self.catalog, self.spec, plan, run=self.run) else plan

    def ensure(self, schema) -> None:
        struct = _fields(schema)
        if self._waiting is not None:
            if struct is None:
                self._ready = False      # the decided recreate, then the table, with the first rows
                return
            table_setup.destroy(self.catalog, self.spec, self._waiting, struct, self.run)
            self._waiting = None
        self._ready = table_setup.ensure(self.catalog, self.spec, struct)

    # -- stage, then publish --------------------------------------------------------------------
    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        """Stage the batch's rows of every route writing the table (the part to decide)."""
        total = int(batch.previous_state.get("total_rows", 0))
        if not rows.parts:
            return StagedBatch(publish={}, state={"rows": 0, "total_rows": total})
        started = time.perf_counter()
        df = rows.union()
        try:
            if not self._ready:
                self.ensure(df.schema)       # a table prepared before any rows of it: made of these
            table = evolve(self.catalog, self.spec, self.catalog.load_table(self.identifier), df)
            directory = staging_dir(table.metadata, batch.transaction_id, self.sink_key, batch.staging_tag)
            part = stage(self.spark, self.spec, table, df, directory)
        except (IcebergWriteError, UnsupportedIcebergType) as exc:
            raise IcebergSinkError(f"Iceberg sink {self.name}: {exc}") from None
        log.info("Iceberg sink %s: batch %s staged %s, %d rows in %d files, %.2f s", self.name, batch.batch_id,
                 part["mode"], part["rows"], len(part["added"]), time.perf_counter() - started)
        return StagedBatch(publish={"transaction_id": batch.transaction_id, **part},
                           state={"rows": part["rows"], "total_rows": total + part["rows"]})

    def publish(self, part: dict) -> None:
        """Commit a decided part as one snapshot, once (see the module doc)."""
        from pyiceberg.exceptions import CommitFailedException

        from seatide.connectors.iceberg.row_delta import RowDeltaError

        if not part:
            return               # a target without rows in the batch
        transaction_id = part["transaction_id"]
        for attempt in range(COMMIT_ATTEMPTS):
            table = self.catalog.load_table(self.identifier)
            if self._committed(table, part):
                return
            try:
                added, removed = files_on(self.spark, self.spec, table, part)
            except Exception as exc:
                if self._committed(self.catalog.load_table(self.identifier), part):
                    return       # a racing attempt committed it, and removed what it no longer needed
                raise self._failed(exc, transaction_id) from None
            if not added and not removed:
                return           # nothing changes the table (an empty batch, deletes of absent keys)
            failpoints.hit("iceberg.before_commit")
            try:
                table = commit_snapshot(table, self.spec.branch, transaction_id, part["staging"], added, removed,
                                        {"seatide.rows": str(part["rows"])})
            except CommitFailedException as exc:
                log.info("Iceberg sink %s: %s lost a commit race (%s); looking again", self.name, transaction_id, exc)
                backoff(attempt)
                continue
            except RowDeltaError as exc:       # only a part decided by an earlier SeaTide, on a head moved since
                raise IcebergSinkError(f"Iceberg sink {self.name}: {exc}: another writer changed the table between "
                                       "the batch's decision and its commit; restore the table or resume the job "
                                       "with --fallback fresh") from None
            failpoints.hit("iceberg.after_commit")
            self._drop_unused(table.metadata, part, {local_path(f.file_path) for f in added}, part["staging"])
            self._commits += 1
            self._maintain()
            return
        raise RuntimeError(f"Iceberg sink {self.name}: {transaction_id} could not commit after {COMMIT_ATTEMPTS} "
                           "attempts: other writers commit to the table too often")

    def _committed(self, table, part: dict) -> bool:
        try:
            done = committed_snapshot(table.metadata, self.spec.branch, part["transaction_id"],
                                      part.get("base_sequence"))
        except MarkLost as exc:
            raise IcebergSinkError(f"Iceberg sink {self.name}: {exc}") from None
        if done is None:
            return False
        log.info("Iceberg sink %s: %s is committed already", self.name, part["transaction_id"])
        summary = done.summary.additional_properties if done.summary else {}
        if summary.get(TRANSACTION_KEY) == part["transaction_id"] and STAGING_KEY in summary:   # the batch's own
            self._drop_unused(table.metadata, part, _added_paths(table, done), summary[STAGING_KEY])
        return True

    def _failed(self, exc: Exception, transaction_id: str) -> Exception:
        if isinstance(exc, FileNotFoundError):
            return IcebergSinkError(f"Iceberg sink {self.name}: a data file of decided batch {transaction_id} is gone "
                                    f"({exc.filename}); was the table's data directory cleaned while the job was "
                                    "stopped?")
        if isinstance(exc, (IcebergWriteError, UnsupportedIcebergType)):
            return IcebergSinkError(f"Iceberg sink {self.name}: {exc}")
        return exc

    def _drop_unused(self, metadata, part: dict, committed: set[str], committed_staging: str) -> None:
        """Remove the batch's files that its snapshot (``committed``: the files it added, in
        ``committed_staging``) does not reference and no other snapshot can: other attempts'
        staging (they died before the decision), and in the committed staging a rewrite staged for
        another head, a copy-on-write batch's keys, keys an empty branch did not need as deletes."""
        keep = {os.path.basename(part["staging"]), os.path.basename(committed_staging)}
        prefix = os.path.basename(staging_dir(metadata, part["transaction_id"], self.sink_key, "X"))[:-1]
        root = data_root(metadata)
        for name in os.listdir(root) if os.path.isdir(root) else ():
            if name.startswith(prefix) and name not in keep:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        for staging in {part["staging"], committed_staging}:
            for directory, _dirs, files in os.walk(staging, topdown=False):
                try:         # another attempt that found the batch committed may be cleaning too
                    for name in files:
                        if os.path.join(directory, name) not in committed:
                            os.remove(os.path.join(directory, name))
                    if directory != staging and not os.listdir(directory):
                        os.rmdir(directory)
                except OSError:
                    pass

    def _maintain(self) -> None:
        from seatide.connectors.iceberg import maintenance

        spec = self.spec
        if spec.rewrite_every and self._commits % spec.rewrite_every == 0:
            maintenance.rewrite_small_files(self.spark, self.catalog, self.identifier, spec.branch,
                                            spec.rewrite_target_bytes)
        if spec.expire_older_than_ms is not None:
            maintenance.expire_snapshots(self.catalog, self.identifier, spec.expire_older_than_ms, spec.retain_last)


def _fields(schema):
    """The input's fields, without the hidden columns (row kind, row sequence); None unknown."""
    if schema is None:
        return None
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in HIDDEN_COLUMNS])


def _added_paths(table, snapshot) -> set[str]:
    """The local paths of the files ``snapshot`` added."""
    from pyiceberg.manifest import ManifestEntryStatus

    added = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id == snapshot.snapshot_id:
            added |= {local_path(e.data_file.file_path) for e in manifest.fetch_manifest_entry(table.io)
                      if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snapshot.snapshot_id}
    return added


__all__ = ["IcebergTarget"]
