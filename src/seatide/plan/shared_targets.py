"""Sinks of one job that write the same target must give it the same save modes.

A target's save modes are decided once per job run, by whichever sink prepares it first
(``plugin/save_mode_door.py``, ``SaveModeDoor``). Where one sink of the target says DROP_DATA (or
RECREATE_SCHEMA, CUSTOM_PROCESSING) and another APPEND_DATA, nothing orders the two: a file sink's
APPEND_DATA passes no door, so its first batch may commit before the DROP_DATA's door, which then
either empties those rows (before ``store/kept_output.py``) or is refused (since): which one happens
is timing, and a new submission races the same way (outside review 4, F3). SeaTunnel applies save
modes once, when the job starts, before any row is written; SeaTide prepares each pipeline's sinks
when that pipeline starts. So such a config is refused when it is planned, naming both sinks and the
target, where the target is known then: the same connector with the same options besides its save
modes. A target whose name is filled in per table (``${...}``), or options that differ, are known
only at batch time: the door's refusal says the same then.
"""

from __future__ import annotations

import json
import re

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.store.target_identity import file_target, server_host

# The options that say how a sink writes, not where: every other option may pick the target (a Jdbc
# `schema` or `tableSuffix`, an Iceberg catalog's config), and a connector's options are many.
_NOT_WHERE = {"plugin_input", "source_table_name", "data_save_mode", "schema_save_mode", "custom_sql"}
_DESTROYS = {"data_save_mode": ("DROP_DATA", "CUSTOM_PROCESSING"), "schema_save_mode": ("RECREATE_SCHEMA",)}
_SPELLED = ("path", "url", "catalog_name", "database", "namespace", "schema", "table")
_SERVER = re.compile(r"^(jdbc:[A-Za-z0-9]+://)([^/:?,]+)")
_DEFAULTS = {"data_save_mode": "APPEND_DATA", "schema_save_mode": "CREATE_SCHEMA_WHEN_NOT_EXIST"}
SAME_SAVE_MODES = ("give every sink that writes the same target the same data_save_mode and schema_save_mode "
                   "(DROP_DATA on each of them empties the target once, when the first prepares it)")


class _AnyInput:
    """An input table whose name is not known when planning: what a sink fills in from the table it
    receives where an option is left out (``Sink.table_defaults``) comes out as a ``${...}``."""

    table = "${table_name}"
    database = None
    primary_key = None
    constraint_keys = ()


def _where(spec: PluginSpec) -> dict:
    """The sink's options that may pick its target, with what its input fills in where they are left
    out (a Jdbc sink without ``table`` writes its input table, outside review 7) and its path and
    server spelled one way (``store/target_identity.py``: ``out`` and ``out/`` are one path)."""
    try:
        block = type(spec.plugin).table_defaults(dict(spec.block), _AnyInput(), False)
    except Exception:       # a sink whose defaults need more of its input: its target is known at batch time
        return {"table": "${unknown}"}
    where = {key: value for key, value in block.items() if key not in _NOT_WHERE}
    if isinstance(where.get("path"), str) and "${" not in where["path"]:
        where["path"] = file_target(where["path"])
    if isinstance(where.get("url"), str):
        where["url"] = _SERVER.sub(lambda m: m.group(1) + server_host(m.group(2)), where["url"], count=1)
    return where


def _target(spec: PluginSpec) -> tuple | None:
    """The same connector with the same options besides its save modes writes the same target.
    Options that differ MAY pick another target, and a ``${...}`` name depends on the tables routed
    to the sink: such sinks are left to the door, which refuses at batch time if they do share one; a
    wrong refusal here would stop a valid job (outside review 6: two Postgres schemas, a table
    suffix, two Iceberg catalogs)."""
    options = json.dumps(_where(spec), sort_keys=True, default=str)
    return None if "${" in options else (spec.name, options)


def _modes(spec: PluginSpec) -> dict[str, str]:
    return {key: str(spec.block.get(key, default)).upper() for key, default in _DEFAULTS.items()}


def _destroys(modes: dict[str, str]) -> bool:
    return any(modes[key] in values for key, values in _DESTROYS.items())


def _said(spec: PluginSpec, modes: dict[str, str]) -> str:
    return f"{spec.label} ({', '.join(f'{key} = {value}' for key, value in modes.items())})"


def refuse_mixed_save_modes(job: JobConfig) -> None:
    """A ConfigError when two sinks write one target with different save modes, one of them destructive."""
    first: dict[tuple, PluginSpec] = {}
    for sink in job.sinks:
        target = _target(sink)
        if target is None:
            continue
        other = first.setdefault(target, sink)
        mine, theirs = _modes(sink), _modes(other)
        # both destructive: whichever prepares the target first empties it once, before any row of
        # either (the door's one decision), so nothing races (outside review 7)
        if other is not sink and _destroys(mine) != _destroys(theirs):
            spelled = ", ".join(f"{key} = {sink.block[key]}" for key in _SPELLED if key in sink.block) or "its options"
            raise ConfigError(job.source_name, f"{_said(other, theirs)} and {_said(sink, mine)} write the same "
                              f"target ({spelled}) with different save modes; a target's save modes are applied "
                              f"once, by whichever sink prepares it first, and a destructive one would empty "
                              f"or be refused over the other's rows depending on timing: {SAME_SAVE_MODES}",
                              plugin=sink.label, option="data_save_mode", line=sink.line)


__all__ = ["SAME_SAVE_MODES", "refuse_mixed_save_modes"]
