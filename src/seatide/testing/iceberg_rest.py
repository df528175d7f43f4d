"""A small Iceberg REST catalog server, for testing SeaTide's ``type = "rest"`` catalog.

No REST catalog server can be installed here (no Docker, no Maven), so this one follows the
Iceberg REST catalog OpenAPI spec (``rest-catalog-open-api.yaml``) for the subset a writer and
a reader of tables need::

    python -m seatide.testing.iceberg_rest --port 8181 --warehouse /tmp/warehouse

**Warehouses.** ``GET /v1/config?warehouse=NAME`` answers ``overrides: {prefix: NAME}``, as
multi-warehouse servers do; the client then sends every request under ``/v1/NAME/...``, and
NAME is a catalog of its own (``<warehouse>/NAME``, created on first use). Without the
parameter, requests go to ``/v1/...`` and the catalog at ``<warehouse>`` itself. Tests use
this to share one server process yet never see each other's tables. Served, under either:

    GET    /v1/config[?warehouse=NAME]                    defaults, overrides, endpoints
    GET    /v1/namespaces[?parent=a%1Fb]                  list namespaces
    POST   /v1/namespaces                                 create a namespace (409 if it exists)
    GET    /v1/namespaces/{ns}                            load its properties
    HEAD   /v1/namespaces/{ns}                            204 / 404
    DELETE /v1/namespaces/{ns}                            drop (409 when not empty)
    POST   /v1/namespaces/{ns}/properties                 update properties
    GET    /v1/namespaces/{ns}/tables                     list tables
    POST   /v1/namespaces/{ns}/tables                     create (``stage-create`` too)
    GET    /v1/namespaces/{ns}/tables/{table}             load (LoadTableResult)
    HEAD   /v1/namespaces/{ns}/tables/{table}             204 / 404
    DELETE /v1/namespaces/{ns}/tables/{table}[?purgeRequested=true]
    POST   /v1/namespaces/{ns}/tables/{table}             commit: requirements + updates
    POST   /v1/tables/rename                              rename (204)

Namespace levels in a path are joined by the unit separator (``%1F``), as the spec says.
Errors are the spec's ``ErrorModel``: ``{"error": {"message", "type", "code"}}``.

The catalog behind the HTTP surface, and how a commit is decided: ``iceberg_rest_catalog.py``.

Not served (clients are told through ``endpoints``): views, ``register``, credentials vending,
server-side scan planning, multi-table transactions, OAuth. Data and metadata files live on the
local filesystem (``file://``), written by the clients and this server alike.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from seatide.testing.iceberg_rest_catalog import SEPARATOR, RestCatalogService, RestError

log = logging.getLogger("seatide.iceberg_rest")

_PREFIX = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}", "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties", "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables", "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/tables/rename",
]


class RestCatalogServer:
    """The HTTP surface: ``/v1/config``, then each warehouse's catalog by its prefix."""

    def __init__(self, root: str):
        os.makedirs(root, exist_ok=True)
        self.root = os.path.abspath(root)
        self.catalogs: dict[str, RestCatalogService] = {}
        self.lock = threading.Lock()

    def catalog(self, prefix: str) -> RestCatalogService:
        if prefix and (not _PREFIX.match(prefix) or prefix in ("namespaces", "tables", "config")):
            raise RestError(400, "BadRequestException", f"warehouse {prefix!r}: use letters, digits, '_', '-' and '.'")
        with self.lock:
            if prefix not in self.catalogs:
                self.catalogs[prefix] = RestCatalogService(os.path.join(self.root, prefix) if prefix else self.root,
                                                           name=prefix or "rest")
            return self.catalogs[prefix]

    def config(self, query: dict) -> tuple[int, str]:
        warehouse = query.get("warehouse", "")
        if warehouse.startswith("file://") or warehouse.startswith("/"):
            raise RestError(400, "BadRequestException", f"warehouse {warehouse!r}: this server takes a warehouse "
                                                        "name (it keeps the files itself), not a path")
        self.catalog(warehouse)     # checked and created now, so a bad name fails at the client's start
        overrides = {"prefix": warehouse} if warehouse else {}
        return 200, json.dumps({"defaults": {}, "overrides": overrides, "endpoints": ENDPOINTS})

    def handle(self, method: str, path: str, query: dict, body) -> tuple[int, str | None]:
        parts = [p for p in path.split("/") if p != ""]
        if parts[:1] != ["v1"]:
            raise RestError(400, "BadRequestException", f"no route for {method} {path}: paths start with /v1/")
        if method == "GET" and parts[1:] == ["config"]:
            return self.config(query)
        prefix = ""
        if len(parts) > 1 and parts[1] not in ("namespaces", "tables"):
            prefix, parts = unquote(parts[1]), parts[1:]
        route = _route(method, parts[1:])
        if route is None:
            raise RestError(400, "BadRequestException", f"no route for {method} {path}")
        return self.catalog(prefix).serve(method, route, query, body)


def _namespace(segment: str) -> tuple[str, ...]:
    """A path's namespace segment (still percent-encoded): levels joined by %1F, each encoded."""
    raw = segment.replace("%1f", "%1F").replace(SEPARATOR, "%1F")
    levels = tuple(unquote(part) for part in raw.split("%1F"))
    if any(level == "" or "." in level for level in levels):     # the SQL catalog joins levels with dots
        raise RestError(400, "BadRequestException", f"namespace {unquote(segment)!r}: a level is empty or has a '.'")
    return levels


S = RestCatalogService
ROUTES = {  # (method, path shape) -> handler; {ns} and {table} are captured
    ("GET", ("namespaces",)): S.list_namespaces,
    ("POST", ("namespaces",)): S.create_namespace,
    ("GET", ("namespaces", "{ns}")): S.load_namespace,
    ("HEAD", ("namespaces", "{ns}")): S.namespace_exists,
    ("DELETE", ("namespaces", "{ns}")): S.drop_namespace,
    ("POST", ("namespaces", "{ns}", "properties")): S.update_namespace,
    ("GET", ("namespaces", "{ns}", "tables")): S.list_tables,
    ("POST", ("namespaces", "{ns}", "tables")): S.create_table,
    ("GET", ("namespaces", "{ns}", "tables", "{table}")): S.load_table,
    ("HEAD", ("namespaces", "{ns}", "tables", "{table}")): S.table_exists,
    ("DELETE", ("namespaces", "{ns}", "tables", "{table}")): S.drop_table,
    ("POST", ("namespaces", "{ns}", "tables", "{table}")): S.commit_table,
    ("POST", ("tables", "rename")): S.rename_table,
}


def _route(method: str, parts: list[str]):
    for (wanted, shape), handler in ROUTES.items():
        if wanted != method or len(shape) != len(parts):
            continue
        args = []
        for expected, actual in zip(shape, parts):
            if expected == "{ns}":
                args.append(_namespace(actual))
            elif expected == "{table}":
                args.append(unquote(actual))
            elif expected != actual:
                break
        else:
            return handler, args
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive: every answer carries Content-Length
    service: RestCatalogServer

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise RestError(400, "BadRequestException", "the request body must be a JSON object")
            status, text = self.service.handle(method, url.path, query, body)
        except RestError as error:
            status, text = error.status, json.dumps(
                {"error": {"message": error.message, "type": error.kind, "code": error.status}})
        except json.JSONDecodeError as exc:
            status, text = 400, json.dumps({"error": {"message": f"request body is not JSON: {exc}",
                                                      "type": "BadRequestException", "code": 400}})
        data = b"" if text is None or method == "HEAD" else text.encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def log_message(self, format: str, *args) -> None:
        log.debug("%s " + format, self.address_string(), *args)


def make_server(warehouse: str, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server bound to (host, port) (0: a free port, see ``server.server_address``), not started."""
    handler = type("Handler", (_Handler,), {"service": RestCatalogServer(warehouse)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seatide.testing.iceberg_rest",
                                     description="An Iceberg REST catalog for tests (see the module doc).")
    parser.add_argument("--port", type=int, default=8181, help="port to listen on (0: any free port; default 8181)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--warehouse", required=True, help="directory for tables and the catalog's SQLite file")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    warehouse = args.warehouse[len("file://"):] if args.warehouse.startswith("file://") else args.warehouse
    if not os.path.isabs(warehouse):
        print(f"iceberg_rest: --warehouse {args.warehouse!r} must be an absolute directory path", file=sys.stderr)
        return 2
    try:
        server = make_server(warehouse, args.host, args.port)
    except OSError as exc:
        print(f"iceberg_rest: cannot serve on {args.host}:{args.port} with warehouse {warehouse}: {exc}",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    host, port = server.server_address[:2]
    print(f"iceberg_rest: serving http://{host}:{port} warehouse {warehouse}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
