"""Reading a driver's log back, as a tail or in pages, for the REST API.

The worker sends each driver's stderr (and, in a cluster, its stdout) to
``store.paths.driver_log_path``: ``<data dir>/logs/<job id>/attempt-<attempt id>.log``.
A coordinator reads the same file when the data directory is shared (one machine, or a
shared filesystem).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MAX_READ_BYTES = 1 << 20     # one answer never carries more than 1 MiB of log


@dataclass(frozen=True)
class LogPage:
    text: str
    offset: int          # byte offset of ``text`` in the file
    next_offset: int     # where the next page starts (the file's size after a tail)
    size: int            # the file's size when read
    truncated: bool      # the tail's first line was cut by MAX_READ_BYTES


def read_tail(path: str, lines: int) -> LogPage:
    """The last ``lines`` lines (at most ``MAX_READ_BYTES``)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - MAX_READ_BYTES)
        handle.seek(start)
        data = handle.read(size - start)
    # A trailing newline ends the last line; it does not begin another one.
    cut = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            break
    begin = 0 if cut < 0 else cut + 1
    return LogPage(data[begin:].decode("utf-8", "replace"), start + begin, size, size,
                   truncated=cut < 0 and start > 0)


def read_page(path: str, offset: int, limit: int) -> LogPage:
    """``limit`` bytes (at most ``MAX_READ_BYTES``) from ``offset``; empty past the end."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(min(offset, size))
        data = handle.read(min(limit, MAX_READ_BYTES))
    start = min(offset, size)
    return LogPage(data.decode("utf-8", "replace"), start, start + len(data), size, truncated=False)
