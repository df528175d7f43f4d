"""Plugin registry: plugin names -> classes, per kind.

Plugins register with ``@register``; ``load_builtin_plugins`` imports the packages that
hold SeaTide's own connectors and transforms so their decorators run.
"""

from __future__ import annotations

import importlib
import pkgutil

from seatide.plugin.base import Plugin

_PLUGINS: dict[str, dict[str, type[Plugin]]] = {"source": {}, "transform": {}, "sink": {}}
_LOADED = False


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
    load_builtin_plugins()
    return _PLUGINS[kind].get(name.lower())


def names(kind: str) -> list[str]:
    load_builtin_plugins()
    return sorted(cls.plugin_name for cls in _PLUGINS[kind].values())
