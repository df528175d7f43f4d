"""A real HTTP server on 127.0.0.1 in a thread, for the Http connector's tests and its bench.

Each path is answered by a handler the test gives (``route``): it gets the request as it came
(method, path, query, headers, body) and returns a status and a body (a ``dict``/``list`` is
sent as JSON). Every request is kept in ``requests``, in the order they came, so a test can
check what the connector sent: its headers, its body, how many times it asked.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]         # each parameter's last value
    headers: dict[str, str]       # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Request], tuple[int, Any]]


class LocalHttp:
    def __init__(self):
        self.requests: list[Request] = []
        self.routes: dict[str, Handler] = {}
        self._lock = threading.Lock()
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"       # keep-alive, as a real server does
            # The status line and headers, then the body, go in two writes: with Nagle's algorithm the
            # body waits for the client's delayed ACK of the headers, 40 ms an answer on Linux.
            disable_nagle_algorithm = True

            def _answer(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, parts.path,
                                  {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                                  {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                with server._lock:
                    server.requests.append(request)
                    handler = server.routes.get(parts.path)
                status, body = handler(request) if handler else (404, {"error": "no such path"})
                data = body if isinstance(body, bytes) else (
                    body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode("utf-8"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if not isinstance(body, (str, bytes))
                                 else "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:       # quiet: the tests read ``requests``
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-http", daemon=True)
        self._thread.start()

    def route(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def sent(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.routes.clear()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def failing(times: int, status: int, then: Handler) -> Handler:
    """A handler that answers ``status`` to its first ``times`` requests, then as ``then`` does."""
    count = {"n": 0}

    def handler(request: Request) -> tuple[int, Any]:
        count["n"] += 1
        if count["n"] <= times:
            return status, {"error": f"failure {count['n']} of {times}"}
        return then(request)

    return handler


__all__ = ["LocalHttp", "Request", "failing"]
