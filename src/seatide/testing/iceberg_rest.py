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

**Storage.** The catalog behind the HTTP surface is pyiceberg's own ``SqlCatalog`` on a SQLite
file in the warehouse (``rest-catalog.db``, Iceberg's JDBC catalog tables), so the
spec's models are parsed with pyiceberg's models and metadata is built by pyiceberg's
``update_table_metadata``. **A commit** loads the table's current metadata, validates every
requirement against it (``assert-create``, ``assert-table-uuid``, ``assert-ref-snapshot-id``,
``assert-last-assigned-field-id``, ``assert-current-schema-id``,
``assert-last-assigned-partition-id``, ``assert-default-spec-id``,
``assert-default-sort-order-id``), applies the updates (``assign-uuid``,
``upgrade-format-version``, ``add-schema``, ``set-current-schema``, ``add-spec``,
``set-default-spec``, ``add-sort-order``, ``set-default-sort-order``, ``add-snapshot``,
``set-snapshot-ref``, ``remove-snapshots``, ``remove-snapshot-ref``, ``set-location``,
``set-properties``, ``remove-properties``, statistics), writes a new metadata file and swaps the
table's pointer only if it still names the metadata the requirements were checked against
(``UPDATE ... WHERE metadata_location = <read>``). A failed requirement or a lost swap is
``409 CommitFailedException`` and changes nothing: that is what lets a racing attempt of a
SeaTide batch lose and find the winner's snapshot. One lock serialises catalog calls inside the
process (SQLite has one writer anyway); the optimistic check is what decides between clients.

Limits of the SQL catalog underneath: a namespace level cannot contain ``.``, and tables are
created in one-level namespaces (a rename may move one deeper).

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

log = logging.getLogger("seatide.iceberg_rest")

SEPARATOR = "\x1f"
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


class RestError(Exception):
    """An answer other than success: HTTP status, the spec's error ``type`` and a message."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _error_for(exc: Exception) -> RestError:
    """pyiceberg's exception -> the spec's status and error type."""
    from pydantic import ValidationError
    from pyiceberg import exceptions as e

    table = [(e.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
             (e.NoSuchTableError, 404, "NoSuchTableException"),
             (e.NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
             (e.TableAlreadyExistsError, 409, "AlreadyExistsException"),
             (e.NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
             (e.CommitFailedException, 409, "CommitFailedException"),
             (ValidationError, 400, "BadRequestException"),
             (json.JSONDecodeError, 400, "BadRequestException"),
             (ValueError, 400, "BadRequestException")]
    for kind, status, name in table:
        if isinstance(exc, kind):
            return RestError(status, name, str(exc).splitlines()[0] if str(exc) else name)
    return RestError(500, type(exc).__name__, str(exc))


class _Named:
    """What ``SqlCatalog.commit_table`` reads of the table it is given: its name."""

    def __init__(self, identifier: tuple[str, ...]):
        self.identifier = identifier

    def name(self) -> tuple[str, ...]:
        return self.identifier


class RestCatalogService:
    """The catalog operations behind the routes; each returns (status, JSON text or None)."""

    def __init__(self, warehouse: str, name: str = "rest"):
        from pyiceberg.catalog.sql import SqlCatalog

        os.makedirs(warehouse, exist_ok=True)
        self.warehouse = os.path.abspath(warehouse)
        self.catalog = SqlCatalog(name, uri=f"sqlite:///{self.warehouse}/rest-catalog.db",
                                  warehouse=f"file://{self.warehouse}")
        self.lock = threading.RLock()

    # -- namespaces -----------------------------------------------------------------------
    def list_namespaces(self, query: dict, body) -> tuple[int, str]:
        parent = tuple(query["parent"].split(SEPARATOR)) if query.get("parent") else ()
        if parent and not self.catalog.namespace_exists(parent):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(parent)}")
        found = self.catalog.list_namespaces(parent)
        return 200, json.dumps({"namespaces": [list(n) for n in found]})

    def create_namespace(self, query: dict, body) -> tuple[int, str]:
        namespace, properties = _namespace_body(body)
        self.catalog.create_namespace(namespace, properties)
        return 200, json.dumps({"namespace": list(namespace), "properties": properties})

    def load_namespace(self, query: dict, body, namespace) -> tuple[int, str]:
        properties = self.catalog.load_namespace_properties(namespace)
        return 200, json.dumps({"namespace": list(namespace), "properties": properties})

    def namespace_exists(self, query: dict, body, namespace) -> tuple[int, None]:
        return (204 if self.catalog.namespace_exists(namespace) else 404), None

    def drop_namespace(self, query: dict, body, namespace) -> tuple[int, None]:
        self.catalog.drop_namespace(namespace)
        return 204, None

    def update_namespace(self, query: dict, body, namespace) -> tuple[int, str]:
        removals, updates = body.get("removals") or [], body.get("updates") or {}
        if not isinstance(removals, list) or not isinstance(updates, dict):
            raise RestError(400, "BadRequestException", "removals must be a list and updates an object")
        summary = self.catalog.update_namespace_properties(namespace, set(removals), updates)
        return 200, json.dumps({"removed": summary.removed, "updated": summary.updated, "missing": summary.missing})

    # -- tables ---------------------------------------------------------------------------
    def list_tables(self, query: dict, body, namespace) -> tuple[int, str]:
        if not self.catalog.namespace_exists(namespace):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(namespace)}")
        found = self.catalog.list_tables(namespace)
        return 200, json.dumps({"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in found]})

    def create_table(self, query: dict, body, namespace) -> tuple[int, str]:
        from pyiceberg.catalog.rest import CreateTableRequest, TableResponse
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

        request = CreateTableRequest.model_validate(
            {"location": None, "partition-spec": None, "write-order": None, **body})   # optional in the spec
        identifier = (*namespace, request.name)
        if not self.catalog.namespace_exists(namespace):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(namespace)}")
        args = dict(schema=request.table_schema, location=request.location,
                    partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                    sort_order=request.write_order or UNSORTED_SORT_ORDER, properties=request.properties)
        if request.stage_create:     # nothing stored: the client commits it with assert-create
            if self.catalog.table_exists(identifier):
                raise RestError(409, "AlreadyExistsException", f"Table already exists: {'.'.join(identifier)}")
            staged = self.catalog._create_staged_table(identifier, **args)
            return 200, TableResponse(metadata=staged.metadata, config={}).model_dump_json()
        table = self.catalog.create_table(identifier, **args)
        return 200, TableResponse(metadata_location=table.metadata_location, metadata=table.metadata,
                                  config={}).model_dump_json()

    def load_table(self, query: dict, body, namespace, name) -> tuple[int, str]:
        from pyiceberg.catalog.rest import TableResponse

        table = self.catalog.load_table((*namespace, name))
        return 200, TableResponse(metadata_location=table.metadata_location, metadata=table.metadata,
                                  config={}).model_dump_json()

    def table_exists(self, query: dict, body, namespace, name) -> tuple[int, None]:
        return (204 if self.catalog.table_exists((*namespace, name)) else 404), None

    def drop_table(self, query: dict, body, namespace, name) -> tuple[int, None]:
        purge = str(query.get("purgeRequested", "false")).lower() == "true"
        (self.catalog.purge_table if purge else self.catalog.drop_table)((*namespace, name))
        return 204, None

    def rename_table(self, query: dict, body) -> tuple[int, None]:
        try:
            source, destination = body["source"], body["destination"]
            old = (*source["namespace"], source["name"])
            new = (*destination["namespace"], destination["name"])
        except (KeyError, TypeError):
            raise RestError(400, "BadRequestException", "rename needs source and destination, "
                                                        "each {namespace: [...], name: ...}") from None
        if not self.catalog.namespace_exists(new[:-1]):
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(new[:-1])}")
        if self.catalog.table_exists(new):
            raise RestError(409, "AlreadyExistsException", f"Table already exists: {'.'.join(new)}")
        self.catalog.rename_table(old, new)
        return 204, None

    def commit_table(self, query: dict, body, namespace, name) -> tuple[int, str]:
        """Requirements checked against the current metadata, then updates, then the swap."""
        from pyiceberg.table import CommitTableRequest
        from pyiceberg.table.update import AssertCreate

        from seatide.connectors.iceberg.row_delta import as_the_spec_says     # pyiceberg's is stricter

        identifier = (*namespace, name)
        body = {**body, "identifier": {"namespace": list(namespace), "name": name}}
        request = CommitTableRequest.model_validate(body)
        creating = any(isinstance(r, AssertCreate) for r in request.requirements)
        if not creating and not self.catalog.table_exists(identifier):
            raise RestError(404, "NoSuchTableException", f"Table does not exist: {'.'.join(identifier)}")
        response = self.catalog.commit_table(_Named(identifier), as_the_spec_says(request.requirements),
                                             request.updates)
        return 200, response.model_dump_json()

    def serve(self, method: str, route, query: dict, body) -> tuple[int, str | None]:
        handler, args = route
        with self.lock:
            try:
                return handler(self, query, body, *args)
            except RestError:
                raise
            except Exception as exc:     # pyiceberg's error -> the spec's answer
                error = _error_for(exc)
                if error.status >= 500:
                    log.exception("%s failed", handler.__name__)
                raise error from None


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


def _namespace_body(body) -> tuple[tuple[str, ...], dict]:
    namespace = body.get("namespace") if isinstance(body, dict) else None
    properties = (body.get("properties") or {}) if isinstance(body, dict) else {}
    if not isinstance(namespace, list) or not namespace or not all(
            isinstance(p, str) and p and "." not in p for p in namespace):
        raise RestError(400, "BadRequestException", "namespace must be a non-empty list of names without '.'")
    if not isinstance(properties, dict):
        raise RestError(400, "BadRequestException", "properties must be an object of strings")
    return tuple(namespace), {str(k): str(v) for k, v in properties.items()}


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
