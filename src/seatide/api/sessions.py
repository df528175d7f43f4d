"""A read request whose store session the server ended is answered from a new session.

The API's reads are steps like any other process's (``store/sessions.py``): a restart of the
store's server, or a terminated backend, cuts the session of a request in flight. A GET or
HEAD is taken again, whole, on a new session for up to ``REQUEST_KEEPS_TRYING_S``, as long
as nothing of its answer was sent. Writes are intents: the store's own functions take their
one transaction again (``store/jobs.py``), since a request's body is read only once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from seatide.store.sessions import REQUEST_KEEPS_TRYING_S, next_pause, reason, session_ended

log = logging.getLogger(__name__)


class ReadAgainOnNewSession:
    """ASGI middleware for the reads described above."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        started = False

        async def watched_send(message):
            nonlocal started
            started = True
            await send(message)

        deadline = time.monotonic() + REQUEST_KEEPS_TRYING_S
        pause = 0.0
        while True:
            try:
                await self.app(scope, receive, watched_send)
                return
            except Exception as exc:
                if started or not session_ended(exc) or time.monotonic() + pause >= deadline:
                    raise
                log.warning("%s %s: the store ended its session (%s); taken again on a new session",
                            scope["method"], scope["path"], reason(exc))
            await asyncio.sleep(pause)
            pause = next_pause(pause)
