"""The API token: who may change things on a coordinator (and, with ``--auth-reads``, read).

One app-wide ASGI middleware, keyed on the HTTP method, not on routes: every mutating
call (POST, PUT, PATCH, DELETE) on any path, SeaTide's /api/v1 and the SeaTunnel-compatible
paths at the root alike, needs ``Authorization: Bearer <token>``. Reads (GET, HEAD,
OPTIONS) and ``/metrics`` stay open unless ``auth_reads``. The UI's files (the page and its
script, no data) are always open: the page asks the operator for the token and sends it on
every API call. Tokens are compared in constant time.

Where the token comes from (``load_token``): ``--api-token-file PATH`` first, then
``SEATIDE_API_TOKEN``. A token file that is missing, empty, or readable by every user of
the machine is refused with a message saying what to do; the process does not start.
"""

from __future__ import annotations

import hmac
import json
import os
import stat

TOKEN_ENV = "SEATIDE_API_TOKEN"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _ui_file(path: str) -> bool:
    return path == "/" or path.startswith("/ui/")


class TokenError(Exception):
    """The configured token cannot be used; ``str()`` says why and how to fix it."""


def load_token(token_file: str | None, environ=os.environ) -> str | None:
    """The API token from ``token_file`` or ``SEATIDE_API_TOKEN``; None when neither is set."""
    if token_file:
        try:
            mode = os.stat(token_file).st_mode
            with open(token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise TokenError(f"cannot read the API token file {token_file}: {exc.strerror or exc}; "
                             "create it with the token on one line (chmod 600)") from None
        except UnicodeDecodeError:
            raise TokenError(f"the API token file {token_file} is not UTF-8 text") from None
        if mode & stat.S_IROTH:
            raise TokenError(f"the API token file {token_file} is readable by every user of this machine; "
                             f"run chmod o-r {token_file} (or chmod 600)")
        if not token:
            raise TokenError(f"the API token file {token_file} is empty; write the token in it on one line")
        return token
    token = (environ.get(TOKEN_ENV) or "").strip()
    return token or None


class TokenAuth:
    """ASGI middleware: 401 for a call that needs the token and does not carry it."""

    def __init__(self, app, token: str, auth_reads: bool = False):
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.auth_reads = auth_reads

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        what = "every request" if self.auth_reads else f"{method} requests"
        body = json.dumps({"error": f"this coordinator requires an API token for {what}: send the header "
                                    "'Authorization: Bearer <token>' (the seatide CLI sends it from "
                                    f"{TOKEN_ENV} or --api-token-file)"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, scope) -> bool:
        if scope["method"] in READ_METHODS and (not self.auth_reads or _ui_file(scope["path"])):
            return True
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        return hmac.compare_digest(given, self.expected)
