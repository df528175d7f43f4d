"""Sinks of one job that share a target must give it the same save modes; none destroys a target
that overlaps another sink's.

A target's save modes are decided once per job run, by whichever sink prepares it first
(``plugin/save_mode_door.py``, ``SaveModeDoor``), when that sink's pipeline runs its first batch:
SeaTunnel applies each sink's save modes once, when the job starts, before any row is written. So,
where the targets are known when planning, these configs are refused then, naming both sinks, what
they write and the way on (``ConfigError``: ``seatide check``/``submit`` exit 2):

* one sink of a target destroys (DROP_DATA, RECREATE_SCHEMA, CUSTOM_PROCESSING) and another keeps
  data: nothing orders the two; a file sink's APPEND_DATA passes no door, so its first batch may
  commit before the DROP_DATA's door, which then is refused over those rows
  (``store/kept_output.py``): timing decides (outside review 4, F3);
* two different destructive save modes (DROP_DATA and RECREATE_SCHEMA, or two custom_sql): the
  door carries out one decision, so the second sink's step would never run, silently, and running
  it when that sink prepares could destroy rows the first wrote since (outside review 8, H2);
* LocalFile paths one inside the other, either with a destructive mode: two targets, two
  decisions, and DROP_DATA on ``out`` takes ``out/b``'s files or is refused over them, as the
  pipelines come (review 8, H1).
* save modes that check the target (ERROR_WHEN_DATA_EXISTS, ERROR_WHEN_SCHEMA_NOT_EXIST) or skip
  making it (IGNORE) beside other save modes on one target, or a check on either of two paths one
  inside the other: whether the check finds the other sink's rows is timing (G-fix review, F6).

Every pair of sinks is compared (overlapping is no equivalence). The target is known when planning
where it is the same connector with the same options besides its save modes, or a LocalFile path
(``store/target_identity.py`` says which overlap). A target whose name is filled in per table
(``${...}``), or options that differ, are known only at batch time: the door's refusal says the
same then.
"""

from __future__ import annotations

import json
import os
import re

from seatide.config.job import ConfigError, JobConfig, PluginSpec
from seatide.plugin.sink_targets import modes_destroy
from seatide.store.target_identity import file_target, overlaps, server_host

# The options that say how a sink writes, not where: every other option may pick the target (a Jdbc
# `schema` or `tableSuffix`, an Iceberg catalog's config), and a connector's options are many.
_NOT_WHERE = {"plugin_input", "source_table_name", "data_save_mode", "schema_save_mode", "custom_sql"}
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


def _path(spec: PluginSpec) -> str | None:
    """A LocalFile sink's directory as its target key, where it is known when planning: its path is
    all that picks it (one machine's filesystem), so paths that overlap are targets that overlap."""
    path = spec.block.get("path")
    if spec.name != "LocalFile" or not isinstance(path, str) or "${" in path:
        return None
    return file_target(path)


def _overlap(a: PluginSpec, b: PluginSpec) -> tuple[str, str] | None:
    """How ``a`` and ``b`` share a target when planned: ("same", "") for one target, ("inside", how)
    for LocalFile paths one inside the other (``target_identity.overlaps``), else None."""
    target_a, target_b = _target(a), _target(b)
    if target_a is not None and target_a == target_b:
        return "same", ""
    path_a, path_b = _path(a), _path(b)
    if path_a is not None and path_a == path_b:
        return "same", ""       # one directory, whatever the format: the door's one target
    if path_a is not None and path_b is not None and overlaps(path_a, path_b):
        return "inside", f"path {path_a} and path {path_b}, one inside the other"
    return None


def _modes(spec: PluginSpec) -> dict[str, str]:
    modes = {key: str(spec.block.get(key, default)).upper() for key, default in _DEFAULTS.items()}
    if modes["data_save_mode"] == "CUSTOM_PROCESSING":
        modes["custom_sql"] = str(spec.block.get("custom_sql", "")).strip().rstrip(";").strip()
    return modes


def _step(spec: PluginSpec, modes: dict[str, str]) -> tuple:
    """What the door's one decision carries out for the sink (as ``connectors/jdbc/save_modes.plan``
    picks it): RECREATE_SCHEMA before the data mode, CUSTOM_PROCESSING with its statement. Every
    destructive mode of a LocalFile path empties it (its docs), so those are one step."""
    if spec.name == "LocalFile":
        return ("empty the path",)
    if modes["schema_save_mode"] == "RECREATE_SCHEMA":
        return ("RECREATE_SCHEMA",)
    return (modes["data_save_mode"], modes.get("custom_sql"))


def _destroys(modes: dict[str, str]) -> bool:
    return modes_destroy(modes["schema_save_mode"], modes["data_save_mode"])


def _said(spec: PluginSpec, modes: dict[str, str]) -> str:
    return f"{spec.label} ({', '.join(f'{key} = {value}' for key, value in modes.items())})"


def _spelled(spec: PluginSpec) -> str:
    return ", ".join(f"{key} = {spec.block[key]}" for key in _SPELLED if key in spec.block) or "its options"


def _refusal(first: PluginSpec, second: PluginSpec) -> str | None:
    """Why two sinks' save modes cannot both stand on what they share, or None. Compared pair by
    pair: overlap is no equivalence (``out`` holds ``out/a`` and ``out/b``, which are apart)."""
    shared = _overlap(first, second)
    if shared is None:
        return None
    theirs, mine = _modes(first), _modes(second)
    said = f"{_said(first, theirs)} and {_said(second, mine)}"
    if not (_destroys(mine) or _destroys(theirs)):
        return _checks_differ(first, second, theirs, mine, shared, said)
    if shared[0] == "inside":
        # two targets, two decisions: a destructive one on the enclosing path empties the other's
        # files, or is refused over them (store/kept_output.py), as the pipelines happen to come
        return (f"{said} write targets that overlap ({shared[1]}) with a save mode that destroys: each target's "
                f"save modes are applied when its sink first prepares it, so whether one empties the other's rows "
                f"or is refused over them depends on which pipeline comes first. Ways on: write paths apart "
                f"(neither inside the other), or give both sinks save modes that keep data (data_save_mode = "
                f"APPEND_DATA, schema_save_mode = CREATE_SCHEMA_WHEN_NOT_EXIST)")
    if _destroys(mine) != _destroys(theirs):
        return (f"{said} write the same target ({_spelled(second)}) with different save modes; a target's save "
                f"modes are applied once, by whichever sink prepares it first, and a destructive one would empty "
                f"or be refused over the other's rows depending on timing: {SAME_SAVE_MODES}")
    if _step(first, theirs) != _step(second, mine):
        # the door takes ONE decision per target: the second sink's own step would never run, silently;
        # running it when that sink prepares (another pipeline's first batch, maybe after rows) could
        # destroy rows the first wrote, so no order of the two is safe to promise (outside review 8, H2)
        return (f"{said} write the same target ({_spelled(second)}) with different destructive save modes; a "
                f"target's save modes are carried out once, by whichever sink prepares it first, so only one "
                f"of the two would run, and which is timing. Way on: give every sink of the target the same "
                f"data_save_mode, schema_save_mode and custom_sql (on PostgreSQL one custom_sql may hold both "
                f"statements; the MySQL driver runs one), or "
                f"write two targets")
    return None


def _checks(modes: dict[str, str]) -> bool:
    return any(modes[key].startswith("ERROR_WHEN_") for key in _DEFAULTS)


def _checks_differ(first: PluginSpec, second: PluginSpec, theirs: dict, mine: dict, shared: tuple[str, str],
                   said: str) -> str | None:
    """Save modes that keep data but differ: the first preparer's decision is the one carried out, so
    whether ERROR_WHEN_DATA_EXISTS refuses rows already there, ERROR_WHEN_SCHEMA_NOT_EXIST a missing
    table, or IGNORE leaves the table unmade, would be timing (outside review of the G fixes, F6).
    On paths one inside the other, the enclosing path's check may see the inner sink's files or not,
    and the inner path's check too where the enclosing sink is partitioned by a column: it writes
    into directories (``${k0}=${v0}``) one of which may be the inner path (outside review of stop 46,
    F2); an unpartitioned one never writes there (review of stop 46's keys, 7). Paths are compared
    as ``file_target`` resolves them, links followed (F3)."""
    if shared[0] == "same":
        if theirs == mine:
            return None
        return (f"{said} write the same target ({_spelled(second)}) with different save modes; a target's save "
                f"modes are decided once per job run, by the sink whose pipeline prepares it first, so whether "
                f"the job refuses rows already there or a missing table would depend on which pipeline prepares "
                f"it first: {SAME_SAVE_MODES}")
    for checker, other, modes in ((first, second, theirs), (second, first, mine)):
        if _checks(modes) and (_encloses(checker, other) or _partitioned(other)):
            return (f"{said} write targets that overlap ({shared[1]}), and {checker.label}'s save modes check its "
                    f"path: whether they find {other.label}'s files there depends on which pipeline comes first. "
                    f"Ways on: write paths apart (neither inside the other), or give the checking sink save modes "
                    f"that do not check (data_save_mode = APPEND_DATA, schema_save_mode = "
                    f"CREATE_SCHEMA_WHEN_NOT_EXIST)")
    return None


def _encloses(outer: PluginSpec, inner: PluginSpec) -> bool:
    """``outer``'s path holds ``inner``'s, both as ``file_target`` resolves them (links followed)."""
    return os.path.commonpath([_path(outer), _path(inner)]) == _path(outer)


def _partitioned(spec: PluginSpec) -> bool:
    """A LocalFile sink that writes into directories below its path (``partition_by``): one of them may
    be the inner path. Without it, a sink writes its files in its own directory (and its staging
    directory), never into another path inside it."""
    return bool(spec.block.get("partition_by"))


def refuse_mixed_save_modes(job: JobConfig) -> None:
    """A ConfigError when two sinks write one target, or overlapping LocalFile paths, with save modes
    that cannot both stand: one destroys and the other keeps, two different destructive ones, or
    any destructive one on paths one inside the other. Every pair is compared."""
    sinks = list(job.sinks)
    for index, second in enumerate(sinks):
        for first in sinks[:index]:
            why = _refusal(first, second)
            if why is not None:
                raise ConfigError(job.source_name, why, plugin=second.label, option="data_save_mode",
                                  line=second.line)


__all__ = ["SAME_SAVE_MODES", "refuse_mixed_save_modes"]
