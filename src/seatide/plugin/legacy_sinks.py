"""Opening a sink on the protocol, and sinks not yet on it.

``open_sink`` is how the runtime (and a test) opens a sink for one pipeline: its routes (one
table: a route list of length one) and the ``SinkTargets`` the sink supplies
(``Sink.open_targets``). A sink that still writes through its own ``SinkWriter`` (Iceberg, until
it is ported) is run as ONE target that takes every route, whose writer makes
its own save modes and keeps its records in their old shape (``LegacyTargets``): the same
driver (``plugin.sink_protocol.SinkRun``) decides, publishes and rolls its batches forward.
When the last such sink is ported this module shrinks to ``open_sink``.
"""

from __future__ import annotations

from seatide.plugin.base import Batch, Sink, SinkContext, SinkWriter, StagedBatch
from seatide.plugin.sink_protocol import SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableRoute, with_empty_frame


def routes_of(sink: Sink, routes: list[TableRoute] | None) -> list[TableRoute]:
    """A multi-table input's routes, or the single table's route of length one."""
    if routes:
        return routes
    name = sink.catalog.table if sink.catalog is not None and sink.catalog.table else ""
    return [TableRoute(0, name, sink.catalog, sink)]


def open_sink(sink: Sink, ctx: SinkContext | None, routes: list[TableRoute] | None = None) -> SinkTargets:
    """The sink's targets for one pipeline; ``routes``: a multi-table input's (None: one table)."""
    multi = bool(routes)
    every = routes_of(sink, routes)
    targets = sink.open_targets(ctx, every, multi)
    if targets is None:
        writer = sink.table_writer(ctx, every) if multi else sink.writer(ctx)
        targets = LegacyTargets(writer, every, multi)
    return targets


class LegacyTargets(SinkTargets):
    """A sink's own ``SinkWriter`` as one target ("*") for every route: it gets the batch's
    ``TableFrames`` (a single table: its frame) and the sink's whole state, as it did before."""

    every_batch = True

    def __init__(self, writer: SinkWriter, routes: list[TableRoute], multi: bool):
        self.writer = writer
        self.decided_in_store = writer.publishes_files
        super().__init__(None, routes, multi)

    def target_key(self, route: TableRoute) -> str:
        return "*"

    def open_target(self, key: str, routes: list[TableRoute]) -> Target:
        return _WriterTarget(self.writer, self.multi, routes)

    def evolve(self, changes: list, behaviour: str) -> None:
        self.writer.evolve(changes, behaviour)

    def previous_targets(self, state: dict) -> dict[str, dict]:
        return {"*": state} if state else {}

    def batch_state(self, previous: dict, states: dict[str, dict]) -> dict:
        return states["*"]

    def publish_record(self, parts: dict[str, dict]) -> dict:
        return parts["*"]

    def publish_parts(self, publish: dict) -> list[tuple[str, dict]]:
        return [("*", publish)]


class _WriterTarget(Target):
    def __init__(self, writer: SinkWriter, multi: bool, routes: list[TableRoute]):
        super().__init__("*", routes)
        self.writer = writer
        self.multi = multi

    def _input(self, rows: TargetRows):
        if self.multi:
            return rows.frames
        frames = rows.frames if 0 in rows.frames.frames else with_empty_frame(rows.frames, 0)
        return frames.frames[0]

    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        return self.writer.stage_batch(self._input(rows), batch)

    def publish(self, part: dict) -> None:
        self.writer.publish(part)

    def abort(self, batch_id: int, intent: dict) -> None:
        self.writer.abort_batch(batch_id, intent)

    def apply(self, rows: TargetRows, batch: Batch) -> dict:
        return self.writer.write_batch(self._input(rows), batch)

    def end_of_data(self, state: dict) -> None:
        self.writer.end_of_data(state)


__all__ = ["LegacyTargets", "open_sink", "routes_of"]
