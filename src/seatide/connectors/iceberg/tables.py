"""The Iceberg sink on a multi-table input: every table of a micro-batch decided as one.

Each route (a source table) has its sink, its options filled from its table's catalog
(``namespace = "${database_name}"``, ``table = "${table_name}"``, its own primary key). Routes
whose options name the same Iceberg table (shards of one table) are one *target*: their rows are
written together. One batch:

1. **Stage.** For each target with rows (every target in a plain batch), Spark's executors
   write its data files (appends, or the copy-on-write rewrite by its own keys); before a
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
from dataclasses import dataclass, replace
from functools import reduce

from seatide import failpoints
from seatide.plugin.base import Batch, SinkContext, SinkWriter, StagedBatch
from seatide.plugin.tables import TableFrames, TableRoute


@dataclass
class Target:
    name: str                  # namespace.table, the key of its part of the manifest and state
    routes: list[TableRoute]   # the source tables written into it
    writer: object             # IcebergWriter, built from the first route's sink


class IcebergTables(SinkWriter):
    publishes_files = True     # the runtime's decision covers every table; each commit is a "publish"

    def __init__(self, ctx: SinkContext, routes: list[TableRoute]):
        from seatide.connectors.iceberg.writer import IcebergWriter

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
            writer = IcebergWriter(spec, replace(ctx, plugin_id=f"{ctx.plugin_id}.{group[0].key}"))
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
