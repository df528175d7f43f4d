"""Request bodies have a size limit: a huge body is refused (413) before it is read whole."""

from __future__ import annotations

import json

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    """ASGI middleware: 413 when Content-Length, or the bytes actually sent, pass ``max_bytes``."""

    def __init__(self, app, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        async def tracked_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"error": f"the request body is larger than the limit of {self.max_bytes} bytes "
                                    "(coordinator option --max-request-bytes)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
