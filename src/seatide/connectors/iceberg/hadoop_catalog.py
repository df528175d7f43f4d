"""Iceberg's Hadoop (filesystem) catalog on pyiceberg, for a warehouse on the local filesystem.

pyiceberg has no Hadoop catalog; SeaTunnel's examples use one (``type = "hadoop"``). This one
keeps the layout Iceberg's ``HadoopCatalog``/``HadoopTableOperations`` use, so Spark, Flink or
Trino pointed at the same warehouse see the same tables::

    <warehouse>/<namespace...>/<table>/metadata/v<N>.metadata.json   one per table version
    <warehouse>/<namespace...>/<table>/metadata/version-hint.text    the newest N (a hint)

A namespace is a directory; a table is a directory whose ``metadata`` holds versions.

**The commit point** is creating ``v<N+1>.metadata.json`` where it does not exist yet: the new
metadata is written to a temporary file and hard-linked to its final name, which fails when
another writer created that version first (a rename would replace it silently). That is the
atomic swap Iceberg's spec asks of a filesystem catalog; the loser gets
``CommitFailedException`` and its updates are never visible. The version hint is written
after (atomically replaced); a reader trusts it only as a start and looks for later versions,
so a crash between the two steps loses nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from typing import Any

from pyiceberg.catalog import Catalog, MetastoreCatalog, PropertiesUpdateSummary
from pyiceberg.exceptions import (CommitFailedException, NamespaceAlreadyExistsError, NamespaceNotEmptyError,
                                  NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError)
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from seatide.connectors.iceberg.warehouse import local_warehouse

_VERSION_FILE = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json$")
HINT = "version-hint.text"


class HadoopCatalog(MetastoreCatalog):
    """A filesystem catalog: tables are directories under ``warehouse`` (see the module doc)."""

    def __init__(self, name: str, **properties: str):
        super().__init__(name, **properties)
        self.root = local_warehouse(properties["warehouse"])
        self.properties["warehouse"] = "file://" + self.root

    # -- paths ----------------------------------------------------------------------------
    def _namespace_dir(self, namespace: str | Identifier) -> str:
        parts = Catalog.identifier_to_tuple(namespace)
        for part in parts:
            if not part or part in (".", "..") or "/" in part:
                raise ValueError(f"namespace part {part!r} cannot name a directory")
        return os.path.join(self.root, *parts)

    def _table_dir(self, identifier: str | Identifier) -> str:
        parts = Catalog.identifier_to_tuple(identifier)
        if len(parts) < 2:
            raise NoSuchTableError(f"table identifier {identifier!r} needs a namespace and a name")
        return os.path.join(self._namespace_dir(parts[:-1]), parts[-1])

    @staticmethod
    def _metadata_dir(table_dir: str) -> str:
        return os.path.join(table_dir, "metadata")

    @staticmethod
    def _is_table(directory: str) -> bool:
        meta = os.path.join(directory, "metadata")
        if os.path.exists(os.path.join(meta, HINT)):
            return True
        try:
            return any(_VERSION_FILE.match(n) for n in os.listdir(meta))
        except (FileNotFoundError, NotADirectoryError):
            return False

    def current_version(self, table_dir: str) -> tuple[int, str] | None:
        """(N, path) of the table's newest metadata file, None when it has none."""
        meta = self._metadata_dir(table_dir)
        version = 0
        try:
            with open(os.path.join(meta, HINT)) as handle:
                version = int(handle.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            try:
                names = os.listdir(meta)
            except FileNotFoundError:
                return None
            found = [int(m.group(1)) for m in map(_VERSION_FILE.match, names) if m]
            version = max(found, default=0)
        if version == 0:
            return None
        # The hint may be stale (a crash after the commit, before the hint): newer versions win.
        while self._version_path(meta, version + 1) is not None:
            version += 1
        path = self._version_path(meta, version)
        if path is None:     # a hint naming a version that is gone: look at what is there
            names = os.listdir(meta)
            found = [int(m.group(1)) for m in map(_VERSION_FILE.match, names) if m]
            if not found:
                return None
            version = max(found)
            path = self._version_path(meta, version)
        return version, path

    @staticmethod
    def _version_path(meta: str, version: int) -> str | None:
        for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
            path = os.path.join(meta, name)
            if os.path.exists(path):
                return path
        return None

    # -- tables ---------------------------------------------------------------------------
    def load_table(self, identifier: str | Identifier) -> Table:
        return self._load_versioned(identifier)[1]

    def _load_versioned(self, identifier: str | Identifier) -> tuple[int, Table]:
        """The table as of its newest version, and that version's number (a commit publishes
        at exactly the next one, so that another writer's commit in between makes it fail)."""
        table_dir = self._table_dir(identifier)
        current = self.current_version(table_dir)
        if current is None:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(Catalog.identifier_to_tuple(identifier))} "
                                   f"(no metadata under {table_dir})")
        version, path = current
        location = "file://" + path
        io = load_file_io(properties=self.properties, location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return version, Table(identifier=Catalog.identifier_to_tuple(identifier), metadata=metadata,
                              metadata_location=location, io=io, catalog=self)

    def create_table(self, identifier: str | Identifier, schema: Any, location: str | None = None,
                     partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                     sort_order: SortOrder = UNSORTED_SORT_ORDER, properties: Properties = EMPTY_DICT) -> Table:
        table_dir = self._table_dir(identifier)
        if not os.path.isdir(os.path.dirname(table_dir)):
            raise NoSuchNamespaceError(f"Namespace does not exist: {Catalog.namespace_from(identifier)}")
        wanted = "file://" + table_dir
        if location and location.rstrip("/") not in (wanted, table_dir):
            raise ValueError(f"a hadoop catalog keeps a table at {wanted}; it cannot be created at {location}")
        staged = self._create_staged_table(identifier, schema, wanted, partition_spec, sort_order, properties)
        if not self._publish(self._metadata_dir(table_dir), 1, staged.metadata):
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(Catalog.identifier_to_tuple(identifier))}")
        return self.load_table(identifier)

    def commit_table(self, table: Table, requirements: tuple, updates: tuple) -> CommitTableResponse:
        identifier = table.name()
        table_dir = self._table_dir(identifier)
        try:
            loaded, current_table = self._load_versioned(identifier)
        except NoSuchTableError:
            loaded, current_table = 0, None
        staged = self._update_and_stage_table(current_table, identifier, requirements, updates)
        if current_table is not None and staged.metadata == current_table.metadata:
            return CommitTableResponse(metadata=current_table.metadata,
                                       metadata_location=current_table.metadata_location)
        # The version the requirements were checked against, plus one: reading the newest
        # number again here would publish over a writer that committed in between, its
        # snapshot lost from the table's history though it was told it had committed.
        version = loaded + 1
        if not self._publish(self._metadata_dir(table_dir), version, staged.metadata):
            raise CommitFailedException(f"Table {'.'.join(identifier)} was updated by another writer "
                                        f"(version {version} exists)")
        location = "file://" + os.path.join(self._metadata_dir(table_dir), f"v{version}.metadata.json")
        return CommitTableResponse(metadata=staged.metadata, metadata_location=location)

    def _publish(self, meta: str, version: int, metadata) -> bool:
        """Create ``v<version>.metadata.json`` unless it exists (the commit point); then the hint."""
        os.makedirs(meta, exist_ok=True)
        final = os.path.join(meta, f"v{version}.metadata.json")
        fd, tmp = tempfile.mkstemp(prefix=f".v{version}-{uuid.uuid4().hex[:8]}-", suffix=".tmp", dir=meta)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(metadata.model_dump_json(exclude_none=True).encode())
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, final)     # fails if the version exists: never replaces another's commit
            except FileExistsError:
                return False
        finally:
            os.unlink(tmp)
        self._write_hint(meta, version)
        return True

    @staticmethod
    def _write_hint(meta: str, version: int) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".hint-", dir=meta)
        with os.fdopen(fd, "w") as handle:
            handle.write(str(version))
        os.replace(tmp, os.path.join(meta, HINT))

    def drop_table(self, identifier: str | Identifier) -> None:
        table_dir = self._table_dir(identifier)
        if not self._is_table(table_dir):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(Catalog.identifier_to_tuple(identifier))}")
        shutil.rmtree(table_dir)     # as Iceberg's HadoopCatalog: the table is its directory

    def purge_table(self, identifier: str | Identifier) -> None:
        self.drop_table(identifier)

    def table_exists(self, identifier: str | Identifier) -> bool:
        try:
            return self._is_table(self._table_dir(identifier))
        except (NoSuchTableError, ValueError):
            return False

    def rename_table(self, from_identifier, to_identifier) -> Table:
        raise NotImplementedError("a hadoop catalog cannot rename tables (Iceberg's cannot either)")

    def register_table(self, identifier, metadata_location: str, overwrite: bool = False) -> Table:
        raise NotImplementedError("a hadoop catalog cannot register tables (Iceberg's cannot either)")

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        directory = self._namespace_dir(namespace)
        if not os.path.isdir(directory):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        parts = Catalog.identifier_to_tuple(namespace)
        return [(*parts, n) for n in sorted(os.listdir(directory)) if self._is_table(os.path.join(directory, n))]

    # -- namespaces -----------------------------------------------------------------------
    def create_namespace(self, namespace: str | Identifier, properties: Properties = EMPTY_DICT) -> None:
        directory = self._namespace_dir(namespace)
        if os.path.isdir(directory):
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {namespace}")
        os.makedirs(directory)

    def drop_namespace(self, namespace: str | Identifier) -> None:
        directory = self._namespace_dir(namespace)
        if not os.path.isdir(directory):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        if os.listdir(directory):
            raise NamespaceNotEmptyError(f"Namespace {namespace} is not empty")
        os.rmdir(directory)

    def namespace_exists(self, namespace: str | Identifier) -> bool:
        directory = self._namespace_dir(namespace)
        return os.path.isdir(directory) and not self._is_table(directory)

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        parts = Catalog.identifier_to_tuple(namespace) if namespace else ()
        directory = self._namespace_dir(parts) if parts else self.root
        if not os.path.isdir(directory):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        return [(*parts, n) for n in sorted(os.listdir(directory))
                if os.path.isdir(os.path.join(directory, n)) and not n.startswith(".")
                and not self._is_table(os.path.join(directory, n))]

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        directory = self._namespace_dir(namespace)
        if not os.path.isdir(directory):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        return {"location": "file://" + directory}

    def update_namespace_properties(self, namespace, removals=None, updates=EMPTY_DICT) -> PropertiesUpdateSummary:
        raise NotImplementedError("a hadoop catalog keeps no namespace properties")

    # -- views: a hadoop catalog has none --------------------------------------------------
    def list_views(self, namespace) -> list[Identifier]:
        return []

    def view_exists(self, identifier) -> bool:
        return False

    def load_view(self, identifier):
        raise NotImplementedError("a hadoop catalog has no views")

    def drop_view(self, identifier) -> None:
        raise NotImplementedError("a hadoop catalog has no views")

    def register_view(self, identifier, metadata_location: str):
        raise NotImplementedError("a hadoop catalog has no views")

    def create_view(self, *args, **kwargs):
        raise NotImplementedError("a hadoop catalog has no views")


__all__ = ["HadoopCatalog", "HINT", "local_warehouse"]
