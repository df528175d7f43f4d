"""Loading a stored config without asking its sources' servers for their tables.

Loading a job's config builds its sinks from the tables their sources describe, and a CDC source asks its
server for them (up to its connect timeout, and libpq tries twice). The leader's release and cleanup load
stored configs inside the door's transaction, on the thread that renews its lease, to reach the sources'
``release``, which needs no table: there a silent server held the step for many seconds (outside review of
642a2cc/2e93916, F3). Within ``servers_unasked()`` a source's ``tables`` gives the names and configured keys
alone, as it does when its server cannot be reached.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_UNASKED: ContextVar[bool] = ContextVar("seatide_servers_unasked", default=False)


@contextmanager
def servers_unasked() -> Iterator[None]:
    token = _UNASKED.set(True)
    try:
        yield
    finally:
        _UNASKED.reset(token)


def servers_asked() -> bool:
    """False within ``servers_unasked()``: a source describes its tables from its config alone."""
    return not _UNASKED.get()


__all__ = ["servers_asked", "servers_unasked"]
