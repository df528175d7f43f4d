"""The catalog behind the test REST server's HTTP surface (``iceberg_rest.py``): one
``RestCatalogService`` per warehouse, each request's handler, and the spec's errors.

Apart from the HTTP layer (routes, warehouses, the server process) because this is where the
catalog's rules are: what a create, a rename and a commit check, and how a commit is decided.

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
"""

from __future__ import annotations

import json
import logging
import os
import threading

log = logging.getLogger("seatide.iceberg_rest")

SEPARATOR = "\x1f"


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


def _namespace_body(body) -> tuple[tuple[str, ...], dict]:
    namespace = body.get("namespace") if isinstance(body, dict) else None
    properties = (body.get("properties") or {}) if isinstance(body, dict) else {}
    if not isinstance(namespace, list) or not namespace or not all(
            isinstance(p, str) and p and "." not in p for p in namespace):
        raise RestError(400, "BadRequestException", "namespace must be a non-empty list of names without '.'")
    if not isinstance(properties, dict):
        raise RestError(400, "BadRequestException", "properties must be an object of strings")
    return tuple(namespace), {str(k): str(v) for k, v in properties.items()}
