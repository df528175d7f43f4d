"""The schema-change options both CDC sources take, and the behaviour they name (plugin/evolution.py)."""

from __future__ import annotations

from seatide.plugin.evolution import BEHAVIOURS, DEFAULT_BEHAVIOUR
from seatide.plugin.options import BOOL, Option, OptionError, Options, enum

SCHEMA_CHANGE_OPTIONS: tuple[Option, ...] = (
    Option("schema.change.behavior", enum(*BEHAVIOURS), None,
           "what a change of a captured table's columns does (Flink CDC 3's behaviours): exception fails "
           "the job; evolve applies it to the sink (a change the sink refuses fails the job, naming the "
           "statement); try_evolve applies it where the sink accepts it; lenient (the default) adds columns "
           "and widens types but keeps dropped and renamed columns; ignore keeps the sink's columns"),
    Option("schema-changes.enabled", BOOL, None,
           "SeaTunnel's switch: true is schema.change.behavior = evolve, false is ignore"),
)


def change_behaviour(opts: Options, include_schema_changes=None) -> str:
    """The behaviour the options name: schema.change.behavior, else SeaTunnel's switches
    (schema-changes.enabled, debezium.include.schema.changes), else lenient."""
    chosen = opts["schema.change.behavior"]
    switches = [v for v in (opts["schema-changes.enabled"], _flag(include_schema_changes)) if v is not None]
    if chosen is not None:
        if any(v != (chosen == "evolve") for v in switches if chosen in ("evolve", "ignore")):
            raise OptionError("schema.change.behavior", f"schema.change.behavior = {chosen} contradicts SeaTunnel's "
                              "schema-changes switch given too; keep one of them")
        return chosen
    if switches:
        return "evolve" if switches[0] else "ignore"
    return DEFAULT_BEHAVIOUR


def _flag(value) -> bool | None:
    if value is None:
        return None
    return str(value).strip().lower() == "true"


__all__ = ["SCHEMA_CHANGE_OPTIONS", "change_behaviour"]
