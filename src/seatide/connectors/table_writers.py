"""A multi-table sink made of its tables' own writers, decided as one.

``Sink.table_writer`` returns this by default (docs/design/multi-table.md): each table of the
input has its route, and each route's sink (built for that table, its options filled from the
table's catalog) its own writer. For one batch:

* writers that publish files (LocalFile) stage their table each, and the batch's manifest holds
  every table's manifest: the runtime records ONE decision for all of them
  (``runtime.commit_log``), then ``publish`` publishes each table's part;
* other writers (Console, Assert) write their table each in turn.

The state committed with a batch is ``{"rows": n, "tables": {table name: that table's state}}``;
a table without rows in the batch keeps the state it had, so a table's writer always sees its
own table's previous state (its save modes are made before its first batch, and only then).
"""

from __future__ import annotations

from dataclasses import replace

from seatide import failpoints
from seatide.plugin.base import Batch, SinkContext, SinkWriter, StagedBatch
from seatide.plugin.tables import TableFrames, TableRoute


class TableWriters(SinkWriter):
    def __init__(self, ctx: SinkContext, routes: list[TableRoute]):
        self.routes = routes
        # each table's writer stages apart from the others (its own plugin id): two tables may share a path
        self.writers = {route.index: route.sink.writer(replace(ctx, plugin_id=f"{ctx.plugin_id}.{route.key}"))
                        for route in routes}
        kinds = {w.publishes_files for w in self.writers.values()}
        if len(kinds) != 1:
            raise ValueError("the tables' writers of one sink must all publish files, or none")
        self.publishes_files = kinds.pop()
        self.by_key = {route.key: route for route in routes}

    def _batch(self, batch: Batch, route: TableRoute) -> Batch:
        tables = batch.previous_state.get("tables", {})
        return replace(batch, transaction_id=f"{batch.transaction_id}_{route.key}",
                       previous_state=tables.get(route.name, {}),
                       save_modes_key=f"{batch.save_modes_key}_{route.key}")

    def _state(self, batch: Batch, states: dict[str, dict]) -> dict:
        tables = {**batch.previous_state.get("tables", {}), **states}
        return {"rows": sum(int(s.get("rows", 0)) for s in states.values()), "tables": tables}

    def write_batch(self, frames: TableFrames, batch: Batch) -> dict:
        states = {}
        for route in self.routes:
            if route.index in frames.frames:
                states[route.name] = self.writers[route.index].write_batch(frames.frames[route.index],
                                                                           self._batch(batch, route))
        return self._state(batch, states)

    def stage_batch(self, frames: TableFrames, batch: Batch) -> StagedBatch:
        states, publish = {}, {}
        for route in self.routes:
            if route.index in frames.frames:
                staged = self.writers[route.index].stage_batch(frames.frames[route.index], self._batch(batch, route))
                states[route.name], publish[route.key] = staged.state, staged.publish
        return StagedBatch(publish={"tables": publish}, state=self._state(batch, states))

    def publish(self, publish: dict) -> None:
        for key, part in publish["tables"].items():
            route = self.by_key.get(key)
            if route is None:
                raise ValueError(f"a decided batch holds files of a table this sink no longer writes "
                                 f"(route {key}); resume with the job's earlier table list")
            self.writers[route.index].publish(part)
            failpoints.hit("sink.table_published")     # a crash with some tables published, not all

    def evolve(self, changes: list, behaviour: str) -> None:
        for route in self.routes:
            self.writers[route.index].evolve([c for c in changes if c.table == route.name], behaviour)

    def end_of_data(self, state: dict) -> None:
        tables = state.get("tables", {})
        for route in self.routes:
            self.writers[route.index].end_of_data(tables.get(route.name, {}))


__all__ = ["TableWriters"]
