"""What a request may carry: a body of bounded size (a huge one is refused, 413, before it
is read whole), JSON nested no deeper than Python's reader goes, ids within the store's integer
range, and one HTTP status per refusal kind."""

from __future__ import annotations

import json
from typing import Callable

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException     # what FastAPI raises for a body it cannot read

from seatide.intents import Refusal, RefusalKind

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
# Ids and offsets a request may name: above this they cannot exist (BIGINT columns).
MAX_ID = 2**62
HTTP_STATUS = {RefusalKind.BAD_REQUEST: 400, RefusalKind.NOT_FOUND: 404, RefusalKind.CONFLICT: 409}


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
        refused = False

        async def counted_receive():
            # The app may catch what its body reader raises (FastAPI answers 400): so answer
            # 413 here, tell the app the client left, and drop whatever it sends after.
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes and not refused:
                refused = True
                await self._refuse(send)
            return {"type": "http.disconnect"} if refused else message

        async def guarded_send(message):
            if not refused:
                await send(message)

        await self.app(scope, counted_receive, guarded_send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"error": f"the request body is larger than the limit of {self.max_bytes} bytes "
                                    "(coordinator option --max-request-bytes)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class BodyRoute(APIRoute):
    """A JSON body nested past what Python's JSON reader recurses through (about 1,000 levels) is
    refused saying so, not with FastAPI's "There was an error parsing the body"."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def answer(request: Request):
            try:
                return await handler(request)
            except HTTPException as exc:
                if isinstance(exc.__cause__, RecursionError):
                    raise Refusal(RefusalKind.BAD_REQUEST, "the request body's JSON nests objects and lists too "
                                                           "deep to read (a job needs a few levels; 100 at the "
                                                           "most): write it flatter") from None
                raise
        return answer
