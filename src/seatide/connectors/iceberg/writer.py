"""The Iceberg sink's writer: one micro-batch, committed at most once as one snapshot.

Protocol for one batch (the commit point is the catalog's, see ``commits``):

1. Before the sink's first batch: the namespace and table (created from the input's fields,
   with the primary keys as identifier fields and the partition keys as identity
   partitions), the branch, and the save modes, each destructive step decided once
   (``batch.decide_once``) with what it removes.
2. The branch head is searched for the batch's transaction id: found, the batch is done.
3. Spark's executors write the batch's data files (appends; or, with primary keys, the
   copy-on-write rewrite of the files the changes touch, ``changes``, or the upserted rows and
   equality deletes of the changed keys, ``merge_on_read``).
4. ``batch.fence()`` (this driver is still the job's attempt), then ONE catalog commit: a
   snapshot adding (and removing) those files, its summary carrying the transaction id,
   required to sit on the head step 2 saw. A racing commit makes it fail: back to step 2.

A zombie driver that passes the fence just before it is replaced commits the batch once,
and its replacement finds the snapshot and writes nothing, as with the Jdbc sink.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

from seatide import failpoints
from seatide.connectors.iceberg import changes as cow
from seatide.connectors.iceberg import deletes, merge_on_read
from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.commits import (COMMIT_ATTEMPTS, STAGING_KEY, backoff, branch_head, commit_files,
                                                commit_snapshot, committed_snapshot)
from seatide.connectors.iceberg.datafiles import IcebergWriteError, conform, describe, staging_dir, write_files
from seatide.connectors.iceberg.schema import UnsupportedIcebergType, arrow_schema, new_table_schema, spark_struct
from seatide.connectors.iceberg.sink import IcebergSinkSpec
from seatide.plugin.base import Batch, PermanentError, SinkContext, SinkWriter
from seatide.plugin.rowkind import HIDDEN_COLUMNS

log = logging.getLogger(__name__)

NAME_MAPPING = "schema.name-mapping.default"


class IcebergSinkError(PermanentError):
    """A table or option that contradicts the input; the message says what to change."""


class IcebergWriter(SinkWriter):
    publishes_files = False       # the catalog's commit is the batch's commit point

    def __init__(self, spec: IcebergSinkSpec, ctx: SinkContext):
        self.spec = spec
        self.spark = ctx.spark
        self.sink_key = f"{ctx.pipeline_id}-{ctx.plugin_id}"
        self.identifier = (spec.namespace, spec.table)
        self.name = f"{spec.namespace}.{spec.table}"
        self._catalog = None
        self._ready = False
        self._commits = 0

    @property
    def catalog(self):
        if self._catalog is None:
            self._catalog = load_catalog(self.spec.catalog_name, self.spec.catalog_config)
        return self._catalog

    # --- one batch ---------------------------------------------------------------------

    def write_batch(self, df, batch: Batch) -> dict:
        from pyiceberg.exceptions import CommitFailedException

        try:
            if not self._ready:
                self._prepare(df, batch)
                self._ready = True
            keyed = bool(self.spec.primary_keys)
            staged = None
            for attempt in range(COMMIT_ATTEMPTS):
                table = self.catalog.load_table(self.identifier)
                done = committed_snapshot(table.metadata, self.spec.branch, batch.transaction_id)
                if done is not None:
                    self._drop_unused_staging(table.metadata, batch, done)
                    return self._state(batch, int(done.summary.additional_properties.get("seatide.rows", 0)),
                                       done.snapshot_id, replayed=True)
                if attempt == 0:
                    table = self._evolve(table, df)
                if keyed or staged is None:      # a rewrite depends on the head; an append does not
                    staged = self._stage(df, table, batch, keyed)
                added, removed, rows, directory = staged
                failpoints.hit("iceberg.before_commit")
                batch.fence()
                if not added and not removed:
                    return self._state(batch, rows, None)
                try:
                    table = commit_snapshot(table, self.spec.branch, batch.transaction_id, directory, added, removed,
                                            {"seatide.rows": str(rows)})
                except CommitFailedException as exc:
                    log.info("Iceberg sink %s: batch %s lost a commit race (%s); looking again",
                             self.name, batch.batch_id, exc)
                    backoff(attempt)
                    continue
                failpoints.hit("iceberg.after_commit")
                head = branch_head(table.metadata, self.spec.branch)
                self._commits += 1
                self._maintain(table)
                return self._state(batch, rows, head.snapshot_id if head else None)
            raise RuntimeError(f"Iceberg sink {self.name}: batch {batch.batch_id} could not commit after "
                               f"{COMMIT_ATTEMPTS} attempts: other writers commit to the table too often")
        except (IcebergWriteError, UnsupportedIcebergType) as exc:
            raise IcebergSinkError(f"Iceberg sink {self.name}: {exc}") from None

    def _state(self, batch: Batch, rows: int, snapshot_id: int | None, replayed: bool = False) -> dict:
        total = int(batch.previous_state.get("total_rows", 0)) + rows
        state = {"rows": rows, "total_rows": total, "snapshot_id": snapshot_id}
        if replayed:
            state["replayed"] = True
        return state

    def _stage(self, df, table, batch: Batch, keyed: bool):
        """Spark writes the batch's files: (added DataFiles, removed DataFiles, rows, directory)."""
        metadata = table.metadata
        directory = staging_dir(metadata, batch.transaction_id, self.sink_key, batch.staging_tag)
        partition_columns = self._partition_columns(metadata)
        struct = spark_struct(metadata.schema())
        started = time.perf_counter()
        if not keyed:
            data = conform(df.drop(*HIDDEN_COLUMNS), metadata.schema(), self.spec.case_sensitive)
            added = describe(metadata, write_files(self.spark, data, metadata, directory, partition_columns))
            rows = sum(f.record_count for f in added)
            log.info("Iceberg sink %s: batch %s, %d rows in %d files written in %.2f s", self.name, batch.batch_id,
                     rows, len(added), time.perf_counter() - started)
            return added, [], rows, directory
        keys = self._table_keys(metadata)
        data = conform(df, metadata.schema(), self.spec.case_sensitive,
                       keep=[c for c in HIDDEN_COLUMNS if c in df.columns])
        net = cow.net_changes(data, keys)
        try:
            if net.changes == 0:
                return [], [], 0, directory
            head = branch_head(metadata, self.spec.branch)
            if merge_on_read.chosen(metadata.properties, self.spec.write_props):
                empty = head is None or head.summary is None or \
                    head.summary.additional_properties.get("total-records") == "0"
                added = merge_on_read.stage(self.spark, metadata, net, keys, directory, partition_columns, empty)
                log.info("Iceberg sink %s: batch %s, %d changed keys merge-on-read: %d data and delete files, %.2f s",
                         self.name, batch.batch_id, net.changes, len(added), time.perf_counter() - started)
                return added, [], net.changes, directory
            candidates = cow.candidate_files(table, head, keys, net.keys, self.spec.case_sensitive)
            affected = cow.affected_files(self.spark, [f.file for f in candidates.data], keys, net.keys, struct)
            rows_out = cow.rewritten_rows(self.spark, table, candidates, affected, keys, net.keys, net.upserts,
                                          struct)
            # The key shuffle leaves spark.sql.shuffle.partitions pieces: as many files as the batch
            # rewrote (plus one for new keys) is enough, and keeps small batches from adding many files.
            rows_out = rows_out.coalesce(max(1, min(len(affected) + 1, self.spark.sparkContext.defaultParallelism)))
            added = describe(metadata, write_files(self.spark, rows_out, metadata, directory, partition_columns))
        finally:
            net.net.unpersist()
        log.info("Iceberg sink %s: batch %s, %d changed keys, %d of %d candidate files rewritten into %d, %.2f s",
                 self.name, batch.batch_id, net.changes, len(affected), len(candidates.data), len(added),
                 time.perf_counter() - started)
        return added, affected, net.changes, directory

    def _partition_columns(self, metadata) -> list[str]:
        schema, columns = metadata.schema(), []
        for field in metadata.spec().fields:
            if not field.transform.preserves_order:
                raise IcebergWriteError(f"the table is partitioned by {field.transform}({field.name}); SeaTide "
                                        "writes tables partitioned by identity or time transforms only")
            columns.append(schema.find_column_name(field.source_id))
        return columns

    def _table_keys(self, metadata) -> list[str]:
        schema = metadata.schema()
        names = {f.name if self.spec.case_sensitive else f.name.lower(): f.name for f in schema.fields}
        keys = []
        for key in self.spec.primary_keys:
            found = names.get(key if self.spec.case_sensitive else key.lower())
            if found is None:
                raise IcebergWriteError(f"iceberg.table.primary-keys names {key}, which the table does not have "
                                        f"(columns: {', '.join(f.name for f in schema.fields)})")
            keys.append(found)
        return keys

    def _drop_unused_staging(self, metadata, batch: Batch, done) -> None:
        """This attempt's files of a batch another attempt committed are orphans: remove them."""
        mine = staging_dir(metadata, batch.transaction_id, self.sink_key, batch.staging_tag)
        if (done.summary.additional_properties.get(STAGING_KEY) != mine) and os.path.isdir(mine):
            shutil.rmtree(mine, ignore_errors=True)

    # --- the table ---------------------------------------------------------------------

    def _prepare(self, df, batch: Batch) -> None:
        """Namespace, table, save modes (before the first batch) and branch."""
        from pyiceberg.exceptions import NamespaceAlreadyExistsError

        spec = self.spec
        struct = df.drop(*HIDDEN_COLUMNS).schema
        exists = self.catalog.table_exists(self.identifier)
        first = not batch.previous_state
        if first:
            failpoints.hit("sink.save_modes")
            if spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST" and not exists:
                raise IcebergSinkError(f"Iceberg sink: schema_save_mode is ERROR_WHEN_SCHEMA_NOT_EXIST and table "
                                       f"{self.name} does not exist; create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
            if spec.schema_save_mode == "RECREATE_SCHEMA" and exists:
                uuid = str(self.catalog.load_table(self.identifier).metadata.table_uuid)
                decided = batch.decide_once(batch.save_modes_key, {"drop_table_uuid": uuid})
                if str(self.catalog.load_table(self.identifier).metadata.table_uuid) == decided.get("drop_table_uuid"):
                    failpoints.hit("iceberg.before_recreate")
                    self.catalog.drop_table(self.identifier)
                exists = self.catalog.table_exists(self.identifier)
        if not exists:
            if spec.schema_save_mode == "IGNORE" or (spec.schema_save_mode == "ERROR_WHEN_SCHEMA_NOT_EXIST"):
                raise IcebergSinkError(f"Iceberg sink: table {self.name} does not exist (schema_save_mode = "
                                       f"{spec.schema_save_mode}); create it or choose CREATE_SCHEMA_WHEN_NOT_EXIST")
            try:
                self.catalog.create_namespace(spec.namespace)
            except NamespaceAlreadyExistsError:
                pass
            self._create(struct)
        table = self.catalog.load_table(self.identifier)
        if spec.branch and spec.branch not in table.metadata.refs:
            head = table.metadata.current_snapshot()
            if head is not None:     # as Iceberg: a new branch starts at main's current snapshot
                from pyiceberg.exceptions import CommitFailedException
                try:
                    table.manage_snapshots().create_branch(head.snapshot_id, spec.branch).commit()
                except CommitFailedException:
                    pass             # another attempt made it
                table = self.catalog.load_table(self.identifier)
        if first:
            self._data_save_mode(table, batch)

    def _create(self, struct) -> None:
        from pyiceberg.exceptions import TableAlreadyExistsError
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        spec = self.spec
        names = {f.name if spec.case_sensitive else f.name.lower(): f.name for f in struct.fields}
        for option, keys in (("iceberg.table.primary-keys", spec.primary_keys),
                             ("iceberg.table.partition-keys", spec.partition_keys)):
            missing = [k for k in keys if (k if spec.case_sensitive else k.lower()) not in names]
            if missing:
                raise IcebergSinkError(f"Iceberg sink: {option} names {', '.join(missing)}, which the input does not "
                                       f"have (fields: {', '.join(struct.names)})")
        keys = [names[k if spec.case_sensitive else k.lower()] for k in spec.primary_keys]
        try:
            schema = new_table_schema(struct, keys)
        except UnsupportedIcebergType as exc:
            raise IcebergSinkError(f"Iceberg sink: {exc}") from None
        fields = [PartitionField(source_id=schema.find_field(names[k if spec.case_sensitive else k.lower()]).field_id,
                                 field_id=1000 + i, transform=IdentityTransform(),
                                 name=names[k if spec.case_sensitive else k.lower()])
                  for i, k in enumerate(spec.partition_keys)]
        properties = {"format-version": "2", **spec.auto_create_props, **spec.write_props}
        try:
            table = self.catalog.create_table(self.identifier, schema=schema, partition_spec=PartitionSpec(*fields),
                                              properties=properties)
        except TableAlreadyExistsError:
            return           # another attempt created it
        self._set_name_mapping(table)

    @staticmethod
    def _set_name_mapping(table) -> None:
        """Files carry no field ids: the name mapping tells readers which column is which field."""
        from pyiceberg.exceptions import CommitFailedException

        mapping = table.metadata.schema().name_mapping.model_dump_json()
        if table.metadata.properties.get(NAME_MAPPING) != mapping:
            try:
                with table.transaction() as tx:
                    tx.set_properties(**{NAME_MAPPING: mapping})
            except CommitFailedException:
                pass

    def _data_save_mode(self, table, batch: Batch) -> None:
        spec = self.spec
        head = branch_head(table.metadata, spec.branch)
        if spec.data_save_mode == "ERROR_WHEN_DATA_EXISTS" and head is not None:
            rows = int(head.summary.additional_properties.get("total-records", 0)) if head.summary else 0
            if rows:
                raise IcebergSinkError(f"Iceberg sink: data_save_mode is ERROR_WHEN_DATA_EXISTS and table {self.name} "
                                       f"holds {rows} rows; empty it or choose APPEND_DATA or DROP_DATA")
        if spec.data_save_mode != "DROP_DATA" or head is None:
            return
        found = deletes.plan(table, head.snapshot_id)
        files = [f.file.file_path for f in (*found.data, *found.deletes)]
        decided = batch.decide_once(batch.save_modes_key + "_data", {"remove": files})
        self._remove_files(set(decided["remove"]))

    def _remove_files(self, paths: set[str]) -> None:
        """One snapshot removing those of ``paths`` still in the branch (a zombie: none)."""
        from pyiceberg.exceptions import CommitFailedException

        for attempt in range(COMMIT_ATTEMPTS):
            table = self.catalog.load_table(self.identifier)
            head = branch_head(table.metadata, self.spec.branch)
            found = deletes.plan(table, head.snapshot_id if head is not None else None)
            present = [f.file for f in (*found.data, *found.deletes) if f.file.file_path in paths]
            if not present:
                return
            try:
                commit_files(table, self.spec.branch, {"seatide.save-mode": "DROP_DATA"}, [], present)
                return
            except CommitFailedException:
                backoff(attempt)
        raise RuntimeError(f"Iceberg sink {self.name}: DROP_DATA could not commit")

    def _evolve(self, table, df):
        """Add the input's new fields as columns (schema evolution), when enabled."""
        schema = table.metadata.schema()
        have = {f.name if self.spec.case_sensitive else f.name.lower() for f in schema.fields}
        struct = df.drop(*HIDDEN_COLUMNS).schema
        new = [f for f in struct.fields if (f.name if self.spec.case_sensitive else f.name.lower()) not in have]
        if not new or not self.spec.schema_evolution:
            return table
        from pyspark.sql.types import StructType

        with table.update_schema(case_sensitive=self.spec.case_sensitive) as update:
            update.union_by_name(arrow_schema(StructType(new)))
        table = self.catalog.load_table(self.identifier)
        self._set_name_mapping(table)
        log.info("Iceberg sink %s: added columns %s", self.name, ", ".join(f.name for f in new))
        return self.catalog.load_table(self.identifier)

    # --- maintenance -------------------------------------------------------------------

    def _maintain(self, table) -> None:
        from seatide.connectors.iceberg import maintenance

        spec = self.spec
        if spec.rewrite_every and self._commits % spec.rewrite_every == 0:
            maintenance.rewrite_small_files(self.spark, self.catalog, self.identifier, spec.branch,
                                            spec.rewrite_target_bytes)
        if spec.expire_older_than_ms is not None:
            maintenance.expire_snapshots(self.catalog, self.identifier, spec.expire_older_than_ms, spec.retain_last)


__all__ = ["IcebergSinkError", "IcebergWriter"]
