"""Plugin registry: plugin names -> classes, per kind.

Plugins register with ``@register`` when their module is imported. ``BUILTIN`` says which
module defines each of SeaTide's own, so a job imports the plugins it names and no others:
importing them all took 0.5 s of every job check (psycopg, pyarrow, the CDC clients), on the
path of every ``seatide run`` and submit. ``load_builtin_plugins`` imports every module of
the connector and transform packages (tests/plugin/test_registry.py checks ``BUILTIN`` with it).
"""

from __future__ import annotations

import importlib
import pkgutil

from seatide.plugin.base import Plugin

_PLUGINS: dict[str, dict[str, type[Plugin]]] = {"source": {}, "transform": {}, "sink": {}}
_LOADED = False

BUILTIN: dict[str, dict[str, str]] = {
    "source": {
        "FakeSource": "seatide.connectors.fake.source",
        "Hive": "seatide.connectors.hive.source",
        "Http": "seatide.connectors.http.source",
        "Iceberg": "seatide.connectors.iceberg.source",
        "Jdbc": "seatide.connectors.jdbc.source",
        "LocalFile": "seatide.connectors.file.source",
        "MySQL-CDC": "seatide.connectors.mysql_cdc.source",
        "Paimon": "seatide.connectors.paimon.source",
        "Postgres-CDC": "seatide.connectors.postgres_cdc.source",
        "Redis": "seatide.connectors.redis.source",
    },
    "transform": {
        "Copy": "seatide.transforms.copy_field",
        "DynamicCompile": "seatide.transforms.dynamic_compile",
        "FieldMapper": "seatide.transforms.field_mapper",
        "Filter": "seatide.transforms.field_filter",
        "FilterRowKind": "seatide.transforms.row_kind",
        "JsonPath": "seatide.transforms.json_path",
        "Replace": "seatide.transforms.replace",
        "RowKindExtractor": "seatide.transforms.row_kind",
        "Split": "seatide.transforms.split",
        "Sql": "seatide.transforms.sql",
    },
    "sink": {
        "Assert": "seatide.connectors.assertion.sink",
        "Console": "seatide.connectors.console",
        "Hive": "seatide.connectors.hive.sink",
        "Http": "seatide.connectors.http.sink",
        "Iceberg": "seatide.connectors.iceberg.sink",
        "Jdbc": "seatide.connectors.jdbc.sink",
        "LocalFile": "seatide.connectors.file.sink",
        "Paimon": "seatide.connectors.paimon.sink",
        "Redis": "seatide.connectors.redis.sink",
    },
}
_BUILTIN_BY_KEY = {kind: {name.lower(): module for name, module in table.items()} for kind, table in BUILTIN.items()}


def register(cls: type[Plugin]) -> type[Plugin]:
    table = _PLUGINS[cls.kind]
    key = cls.plugin_name.lower()
    if key in table and table[key] is not cls:
        raise RuntimeError(f"two {cls.kind} plugins named {cls.plugin_name}")
    table[key] = cls
    return cls


def load_builtin_plugins() -> None:
    global _LOADED
    if _LOADED:
        return
    for package_name in ("seatide.connectors", "seatide.transforms"):
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(package.__path__, package_name + "."):
            importlib.import_module(info.name)
    _LOADED = True


def lookup(kind: str, name: str) -> type[Plugin] | None:
    key = name.lower()
    if key not in _PLUGINS[kind] and key in _BUILTIN_BY_KEY[kind]:
        importlib.import_module(_BUILTIN_BY_KEY[kind][key])
    return _PLUGINS[kind].get(key)


def names(kind: str) -> list[str]:
    return sorted({*BUILTIN[kind], *(cls.plugin_name for cls in _PLUGINS[kind].values())})
