"""The Iceberg sink's writers: a route list staged, decided once and published target by target.

One path for every Iceberg sink. A multi-table input is a list of routes (each a source table,
its sink's options filled from the table's catalog); routes whose options name the same Iceberg
table are one target (shards of one table: their rows are written together, one key's changes
ordered by ``__row_seq`` across them). A single-table sink is a list of one route. One batch:

1. **Stage** each target with rows (every target in a plain batch); a target is prepared before
   its first batch (``target``). Nothing is visible yet.
2. **Decide**: the runtime records ONE fenced decision holding every target's part.
3. **Publish** each target in turn: one snapshot, carrying the batch's transaction id (the same
   id in every table). The catalogs cannot commit several tables at once, so a crash can leave
   some tables committed: the next attempt rolls the decision forward, skips each table whose
   snapshot of the batch exists and commits the others. Every row lands once, and each table has
   at most one snapshot per batch.

State committed with a batch: a single table's ``{"rows", "total_rows"}``; a route list's
``{"rows": n, "tables": {target: {"rows", "total_rows"}}}``. A target keeps its state through
batches without its rows, so it is prepared (save modes) once per run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import reduce

from seatide import failpoints
from seatide.connectors.iceberg.spec import IcebergSinkError, IcebergSinkSpec
from seatide.connectors.iceberg.target import Target
from seatide.plugin.base import Batch, SinkContext, SinkWriter, StagedBatch
from seatide.plugin.tables import TableFrames, TableRoute


class IcebergWriter(SinkWriter):
    """A single-table sink's writer: the route list of its one table."""

    publishes_files = True       # the runtime's decision covers every target; each commit is a "publish"

    def __init__(self, targets: list[Target]):
        self.targets = {t.name: t for t in targets}

    @classmethod
    def of_table(cls, spec: IcebergSinkSpec, ctx: SinkContext) -> "IcebergWriter":
        return cls([Target(spec, ctx, [0])])

    def stage_batch(self, rows, batch: Batch) -> StagedBatch:
        frames = self._frames(rows)
        before = self._before(batch.previous_state)
        parts, states = {}, {}
        for target in self.targets.values():
            present = [frames[i] for i in target.routes if i in frames]
            if not present:
                continue
            df = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), present)
            previous = before.get(target.name, {})
            part = target.stage(df, batch, previous)
            parts[target.name] = part
            total = int(previous.get("total_rows", 0)) + part["rows"]
            states[target.name] = {"rows": part["rows"], "total_rows": total}
        return StagedBatch(publish={"tables": parts}, state=self._state(before, states))

    def publish(self, publish: dict) -> None:
        for name, part in publish["tables"].items():
            target = self.targets.get(name)
            if target is None:
                raise IcebergSinkError(f"a decided batch holds files of Iceberg table {name}, which this sink no "
                                       "longer writes; resume with the job's earlier table list")
            target.publish(part)
            failpoints.hit("sink.table_published")     # a crash with some tables committed, not all

    # -- the input and the state of one table ---------------------------------------------
    def _frames(self, df) -> dict:
        return {0: df}

    def _before(self, previous_state: dict) -> dict:
        (name,) = self.targets
        return {name: previous_state} if previous_state else {}

    def _state(self, before: dict, states: dict) -> dict:
        (name,) = self.targets
        return states.get(name) or {"rows": 0, "total_rows": int(before.get(name, {}).get("total_rows", 0))}


class IcebergTablesWriter(IcebergWriter):
    """A multi-table input's writer: its routes grouped into targets by the table they name."""

    @classmethod
    def of_routes(cls, ctx: SinkContext, routes: list[TableRoute]) -> "IcebergTablesWriter":
        grouped: dict[str, list[TableRoute]] = {}
        for route in routes:
            spec = route.sink.spec()
            where = json.dumps([spec.catalog_name, spec.catalog_config, spec.namespace, spec.table], sort_keys=True,
                               default=str)
            grouped.setdefault(where, []).append(route)
        targets = []
        for group in grouped.values():
            # its own plugin id: the staging directory of each target is its own
            targets.append(Target(group[0].sink.spec(), replace(ctx, plugin_id=f"{ctx.plugin_id}.{group[0].key}"),
                                  [r.index for r in group]))
        return cls(targets)

    def _frames(self, frames: TableFrames) -> dict:
        return frames.frames

    def _before(self, previous_state: dict) -> dict:
        return previous_state.get("tables", {})

    def _state(self, before: dict, states: dict) -> dict:
        return {"rows": sum(s["rows"] for s in states.values()), "tables": {**before, **states}}


__all__ = ["IcebergSinkError", "IcebergTablesWriter", "IcebergWriter"]
