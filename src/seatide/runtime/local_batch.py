"""A small micro-batch of a single-table pipeline, collected on the driver for a sink that stages
rows itself: the same staging a multi-table batch gets (runtime.table_routing), a single table
being a route list of length one.

A Jdbc sink staged a single table's micro-batch by a Spark JDBC write: a Spark job of ≈0.15–0.5 s
whatever its rows, the largest step of a CDC change's way to its target (docs/benchmarks.md, "CDC
end to end over many tables"). When the source's offset says the batch is small
(``Source.batch_bound``: a change stream counts its rows and bytes when it plans the batch), the
sink's ``TableFrames.local`` offers the rows collected on the driver, and a sink that takes them
(the Jdbc sink, into a temporary table inside its commit's transaction) collects them in one Spark
job the first time it asks. Collected only when asked: a batch an earlier attempt committed is never
read, and a sink that stages by Spark reads the frame once, as before. Only with no transform
between the source and its one sink: a transform may make rows the source's bound does not count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from seatide.plugin.tables import TableFrames
from seatide.runtime.table_routing import LOCAL_BATCH_BYTES, LOCAL_BATCH_ROWS, collect_small

log = logging.getLogger(__name__)
_OVER = ()      # more rows than the source's bound, or a value Python cannot hold: left to the sink's frame


def offered(frame, source, end: dict | None) -> "TableFrames | None":
    """``frame`` (route 0's rows) with its rows offered collected, when ``source`` bounds the batch
    ending at offset ``end`` within what the driver collects; None when it does not."""
    bound = source.batch_bound(end) if end is not None else None
    if bound is None or bound[0] > LOCAL_BATCH_ROWS or bound[1] > LOCAL_BATCH_BYTES:
        return None
    return TableFrames({0: frame}, schema_of=lambda _index: frame.schema, local=_Collected(frame, bound[0]))


class _Collected(Mapping):
    """Route 0's rows as tuples of its frame's fields, collected when first asked for."""

    def __init__(self, frame, at_most: int):
        self._frame = frame
        self._at_most = at_most
        self._rows: list | None = None

    def __getitem__(self, index: int) -> list:
        if index != 0:
            raise KeyError(index)
        if self._rows is None:
            started = time.perf_counter()
            # the bound is the source's: the limit keeps a wrong one from filling the driver
            rows = collect_small(self._frame, max(self._at_most, 1))
            if rows is None:
                self._rows = _OVER
            elif len(rows) > self._at_most:
                log.warning("a micro-batch its source bounded at %d rows holds more: staged by Spark",
                            self._at_most)
                self._rows = _OVER
            else:
                self._rows = rows
                log.info("single-table batch of %d rows collected in %.2f s", len(rows),
                         time.perf_counter() - started)
        if self._rows is _OVER:
            raise KeyError(index)      # not collected: the sink reads the frame
        return self._rows

    def __iter__(self):
        return iter((0,))

    def __len__(self) -> int:
        return 1


__all__ = ["offered"]
