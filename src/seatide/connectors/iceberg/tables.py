"""The Iceberg sink on a multi-table input: every table of a micro-batch decided as one.

Each route (a source table) has its sink, its options filled from its table's catalog
(``namespace = "${database_name}"``, ``table = "${table_name}"``, its own primary key). Routes
whose options name the same Iceberg table (shards of one table) are one *target*: their rows are
written together. One batch:

1. **Stage.** For each target with rows (every target in a plain batch), Spark's executors
   write its data files (appends, or the changes by its own keys, copy-on-write or
   merge-on-read: then the part also names its equality-delete files); before a
   target's first batch, its table and save modes are made (``IcebergWriter._prepare``, with
   that target's own previous state and save-mode key).
2. **Decide.** The runtime records ONE fenced decision for the batch, holding every target's
   files (``runtime/commit_log``). A zombie driver decides nothing, so it commits nothing.
3. **Commit.** Each target in turn gets one snapshot of its decided files, whose summary
   carries the batch's transaction id (the same id in every table). The catalogs cannot commit
   several tables at once, so a crash can leave some tables committed: the next attempt rolls
   the decision forward, skips each table whose snapshot of the batch exists and commits the
   others. Every row lands once, and each table has at most one snapshot per batch.

The state committed with a batch is ``{"rows": n, "tables": {target: {"rows", "total_rows"}}}``;
a target keeps its state through batches without its rows, so its save modes run once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, replace
from functools import reduce

from seatide import failpoints
from seatide.connectors.iceberg.commits import COMMIT_ATTEMPTS, backoff, branch_head, commit_snapshot, committed_snapshot
from seatide.connectors.iceberg.datafiles import (IcebergWriteError, data_root, describe, local_path,
                                                  staging_dir)
from seatide.connectors.iceberg.deletes import plan
from seatide.connectors.iceberg.schema import UnsupportedIcebergType
from seatide.connectors.iceberg.writer import IcebergSinkError, IcebergWriter
from seatide.plugin.base import Batch, SinkContext, SinkWriter, StagedBatch
from seatide.plugin.tables import TableFrames, TableRoute

log = logging.getLogger(__name__)


class DecidedWriter(IcebergWriter):
    """One target's writer: stages a batch, and commits it only once the runtime has decided it."""

    def stage_part(self, df, batch: Batch) -> dict:
        """Write the batch's data files for this table, commit nothing: what ``commit_part`` commits
        (JSON: paths only; their footers are read again at the commit)."""
        try:
            if not self._ready:
                self._prepare(df, batch)
                self._ready = True
            table = self._evolve(self.catalog.load_table(self.identifier), df)
            added, removed, rows, directory = self._stage(df, table, batch, bool(self.spec.primary_keys))
        except (IcebergWriteError, UnsupportedIcebergType) as exc:
            raise IcebergSinkError(f"Iceberg sink {self.name}: {exc}") from None
        data = [f for f in added if not f.equality_ids]
        equality = [f for f in added if f.equality_ids]
        return {"transaction_id": batch.transaction_id, "staging": directory, "rows": rows,
                "added": [local_path(f.file_path) for f in data], "removed": [f.file_path for f in removed],
                "equality_deletes": [local_path(f.file_path) for f in equality],
                "equality_ids": list(equality[0].equality_ids) if equality else []}

    def commit_part(self, part: dict) -> None:
        """One snapshot with the decided files, carrying the batch's transaction id; nothing when the
        table has it already (a replay, or a zombie that decided in time and committed first)."""
        from pyiceberg.exceptions import CommitFailedException

        transaction_id = part["transaction_id"]
        for attempt in range(COMMIT_ATTEMPTS):
            table = self.catalog.load_table(self.identifier)
            if committed_snapshot(table.metadata, self.spec.branch, transaction_id) is not None:
                log.info("Iceberg sink %s: %s is committed already", self.name, transaction_id)
                self._drop_undecided_staging(table.metadata, part)
                return
            if not part["added"] and not part["removed"] and not part.get("equality_deletes"):
                return
            removed = self._decided_removals(table, set(part["removed"]))
            try:
                added = describe(table.metadata, part["added"])
                if part.get("equality_deletes"):
                    added += describe(table.metadata, part["equality_deletes"], equality_ids=part["equality_ids"])
            except FileNotFoundError as exc:
                raise IcebergSinkError(f"Iceberg sink {self.name}: a data file of decided batch {transaction_id} "
                                       f"is gone ({exc.filename}); was the table's data directory cleaned while "
                                       "the job was stopped?") from None
            try:
                table = commit_snapshot(table, self.spec.branch, transaction_id, part["staging"], added, removed,
                                        {"seatide.rows": str(part["rows"])})
            except CommitFailedException as exc:
                log.info("Iceberg sink %s: %s lost a commit race (%s); looking again", self.name, transaction_id, exc)
                backoff(attempt)
                continue
            failpoints.hit("iceberg.after_commit")
            self._drop_undecided_staging(table.metadata, part)
            self._commits += 1
            self._maintain(table)
            return
        raise RuntimeError(f"Iceberg sink {self.name}: {transaction_id} could not commit after {COMMIT_ATTEMPTS} "
                           "attempts: other writers commit to the table too often")

    def _decided_removals(self, table, paths: set[str]) -> list:
        """The DataFiles a decided copy-on-write batch replaces, all still in the branch, or an error."""
        if not paths:
            return []
        head = branch_head(table.metadata, self.spec.branch)
        live = plan(table, head.snapshot_id if head is not None else None)
        found = [f.file for f in (*live.data, *live.deletes) if f.file.file_path in paths]
        if len(found) != len(paths):
            raise IcebergSinkError(f"Iceberg sink {self.name}: {len(paths) - len(found)} data files a decided "
                                   "batch rewrites are no longer in the table: another writer changed it between "
                                   "the batch's decision and its commit; restore the table or resume the job "
                                   "with --fallback fresh")
        return found

    def _drop_undecided_staging(self, metadata, part: dict) -> None:
        """Other attempts' files of this batch (they died before the decision) are orphans."""
        prefix = os.path.basename(staging_dir(metadata, part["transaction_id"], self.sink_key, "X"))[:-1]
        root = data_root(metadata)
        decided = os.path.basename(part["staging"])
        for name in os.listdir(root) if os.path.isdir(root) else ():
            if name.startswith(prefix) and name != decided:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


@dataclass
class Target:
    name: str                  # namespace.table, the key of its part of the manifest and state
    routes: list[TableRoute]   # the source tables written into it
    writer: DecidedWriter      # built from the first route's sink


class IcebergTables(SinkWriter):
    publishes_files = True     # the runtime's decision covers every table; each commit is a "publish"

    def __init__(self, ctx: SinkContext, routes: list[TableRoute]):
        grouped: dict[str, list[TableRoute]] = {}
        for route in routes:
            spec = route.sink.spec()
            where = json.dumps([spec.catalog_name, spec.catalog_config, spec.namespace, spec.table], sort_keys=True,
                               default=str)
            grouped.setdefault(where, []).append(route)
        self.targets: dict[str, Target] = {}
        for group in grouped.values():
            spec = group[0].sink.spec()
            # its own plugin id: the staging directory of each target is its own
            writer = DecidedWriter(spec, replace(ctx, plugin_id=f"{ctx.plugin_id}.{group[0].key}"))
            self.targets[writer.name] = Target(writer.name, group, writer)

    def stage_batch(self, frames: TableFrames, batch: Batch) -> StagedBatch:
        before = batch.previous_state.get("tables", {})
        parts, states = {}, {}
        for target in self.targets.values():
            present = [frames.frames[r.index] for r in target.routes if r.index in frames.frames]
            if not present:
                continue
            df = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), present)
            previous = before.get(target.name, {})
            part = target.writer.stage_part(df, replace(
                batch, previous_state=previous, save_modes_key=f"{batch.save_modes_key}_{target.routes[0].key}"))
            parts[target.name] = part
            states[target.name] = {"rows": part["rows"],
                                   "total_rows": int(previous.get("total_rows", 0)) + part["rows"]}
        state = {"rows": sum(s["rows"] for s in states.values()), "tables": {**before, **states}}
        return StagedBatch(publish={"tables": parts}, state=state)

    def publish(self, publish: dict) -> None:
        for name, part in publish["tables"].items():
            target = self.targets.get(name)
            if target is None:
                raise ValueError(f"a decided batch holds files of Iceberg table {name}, which this sink no longer "
                                 "writes; resume with the job's earlier table list")
            target.writer.commit_part(part)
            failpoints.hit("sink.table_published")     # a crash with some tables committed, not all


__all__ = ["IcebergTables"]
