"""A sink's targets at hand in a unit test, without the runtime's records around them."""

from __future__ import annotations

from seatide.plugin.base import Batch, SinkContext
from seatide.plugin.sink_protocol import RoutePart, TargetRows, open_sink
from seatide.plugin.tables import table_frames_of


def apply_one(sink, df, batch: Batch, ctx: SinkContext | None = None) -> dict:
    """A single-table sink's one target applies ``df`` as ``batch``; the target's state after it."""
    targets = open_sink(sink, ctx)
    [key] = targets.keys()
    frames = table_frames_of(df)
    rows = TargetRows((RoutePart(targets.routes[0], batch.transaction_id, frames),), frames)
    return targets.target(key).apply(rows, batch)
