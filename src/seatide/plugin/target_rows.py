"""What a sink's target gets of one batch: each route's rows (``RoutePart``), every route writing
the target together (``TargetRows``). Apart from the protocol (``sink_protocol.py``), which hands
them out, so that a sink's own modules can take them without the protocol's order and records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from seatide.plugin.rowkind import ROW_SEQ_COLUMN
from seatide.plugin.tables import TableFrames, TableRoute


@dataclass(frozen=True)
class RoutePart:
    """One route's rows of a batch, for the route's target."""

    route: TableRoute
    transaction_id: str    # names what the rows become (files): the batch's id, plus the route's key
    frames: TableFrames    # the batch's frames, every route's; this part reads its own

    @property
    def frame(self):
        """The route's rows (built when first asked for: a frame costs Spark an analysis)."""
        return self.frames.frames[self.route.index]

    @property
    def schema(self):
        return self.frames.schema_of(self.route.index)

    @property
    def local(self) -> list[tuple] | None:
        """The route's rows collected on the driver (``TableFrames.local``), or None."""
        return None if self.frames.local is None else self.frames.local.get(self.route.index)


@dataclass(frozen=True)
class TargetRows:
    """What one target gets in one batch: the part of each route that writes it, in route order."""

    parts: tuple[RoutePart, ...]
    frames: TableFrames

    def union(self):
        """Every part's rows in one frame (columns matched by name, missing ones null). It keeps
        ``__row_seq``, comparable across the routes of one source: a sink that applies changes by
        key orders one key's changes by it across every route, not route by route."""
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), [p.frame for p in self.parts])

    def local_in_order(self) -> list[tuple] | None:
        """Every part's collected rows in ``__row_seq`` order, when each part was collected and
        all share one schema holding ``__row_seq``; else None (read ``union``)."""
        locals_ = [p.local for p in self.parts]
        schemas = {p.schema.json() for p in self.parts}
        if any(rows is None for rows in locals_) or len(schemas) != 1:
            return None
        names = self.parts[0].schema.fieldNames()
        if ROW_SEQ_COLUMN not in names:
            return None
        at = names.index(ROW_SEQ_COLUMN)
        return sorted((row for rows in locals_ for row in rows), key=lambda row: row[at])


__all__ = ["RoutePart", "TargetRows"]
