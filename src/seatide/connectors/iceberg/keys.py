"""Which Iceberg table a sink's route writes, as the one sink protocol names its target
(``SinkTargets.target_key``), and the names earlier SeaTides gave the same table.

A table is its catalog's location (``catalogs.catalog_location``: a hadoop warehouse, a SQL
catalog's database, a REST uri and warehouse; no credentials) and its ``namespace.table``. The
``catalog_name`` is part of it only in a SQL (jdbc) catalog, which keeps it in the
``catalog_name`` column of ``iceberg_tables``: two names there are two tables. A REST uri is
one however it is spelled (host case, default port, trailing slash: review N6). A hadoop or REST
catalog's name is a label the client gives it, and two sinks naming one warehouse with two labels
write one table, whose save modes are decided once (review N7). A warehouse path and a SQL
catalog's address are one however they are spelled too (``//``, ``..``, ``file:``; the jdbc: or
SQLAlchemy form, host case, default port: review N8).

A hadoop warehouse's table is keyed by the warehouse's real path instead of a hash, so a LocalFile
path around or inside it overlaps it (outside review 8b, as Paimon's F7).

Earlier keys, whose records (states, decided parts, save-mode decisions) stay the table's:
``hashed_key`` (a hadoop table's before it named its warehouse),
``named_key`` (the port before the key named the catalog's location, and the writer before the
port), ``located_key`` (the version that added the location and kept the label) and
``landed_key`` (the version before N8, whose warehouse paths and SQL addresses were as written).
"""

from __future__ import annotations

import hashlib

from seatide.connectors.iceberg.catalogs import catalog_location, catalog_type
from seatide.connectors.iceberg.spec import IcebergSinkSpec
from seatide.connectors.iceberg.warehouse import local_warehouse
from seatide.store.target_identity import iceberg_target


def table_key(spec: IcebergSinkSpec) -> str:
    """The target ``spec`` writes: a hadoop warehouse's table by the warehouse's real path, so it
    overlaps the directories it lies in (``store.target_identity.iceberg_target``); else
    ``hashed_key``."""
    if catalog_type(spec.catalog_config) == "hadoop":
        return iceberg_target(local_warehouse(spec.catalog_config["warehouse"]), spec.name)
    return hashed_key(spec)


def hashed_key(spec: IcebergSinkSpec) -> str:
    """The catalog's location hashed and the table, the label left out where it names nothing
    (hadoop, REST): every catalog's key, and a hadoop table's before it named its warehouse."""
    return _key(spec, _where(spec))


def located_key(spec: IcebergSinkSpec) -> str:
    """The key of the version that named the catalog's name and location as written (review N6 and
    N8 resolved its spelling since)."""
    return f"iceberg:{spec.catalog_name}@{_where(spec, as_spelled=True)}:{spec.name}"


def landed_key(spec: IcebergSinkSpec) -> str:
    """The key of the version before review N8, which resolved a REST uri's spelling only: a
    warehouse path and a SQL catalog's address as written (a SQL catalog's is ``located_key``)."""
    if catalog_type(spec.catalog_config) == "rest":
        return hashed_key(spec)
    return _key(spec, _where(spec, as_spelled=True))


def named_key(spec: IcebergSinkSpec) -> str:
    """The key before it named the catalog's location: the catalog name and the table (the name of
    the job's save-mode decisions, and the state's and decided parts' key, it recorded)."""
    return f"iceberg:{spec.catalog_name}:{spec.name}"


def _key(spec: IcebergSinkSpec, where: str) -> str:
    if catalog_type(spec.catalog_config) in ("jdbc", "sql"):
        return f"iceberg:{spec.catalog_name}@{where}:{spec.name}"
    return f"iceberg@{where}:{spec.name}"


def _where(spec: IcebergSinkSpec, as_spelled: bool = False) -> str:
    return hashlib.sha1(catalog_location(spec.catalog_config, as_spelled).encode()).hexdigest()[:12]


__all__ = ["hashed_key", "landed_key", "located_key", "named_key", "table_key"]
