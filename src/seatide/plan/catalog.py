"""The catalog of the tables a sink receives, and SeaTunnel's sink option placeholders.

A sink's catalog is the schema of each table its upstream source reads (``Source.tables``:
one for a single-table source, one per table for a multi-table one) carried through the
transforms between them: each transform says what it does to a table with
``Transform.catalog`` (keep it, narrow or rename its fields, or lose its shape). A key
survives only when all of its fields survive under the same names. A sink that reads several
inputs, or a source that declares nothing, has no catalog (None).

The loader computes the catalog before it builds each sink, fills the placeholders of
``concept/sink-options-placeholders.md`` (``${table_name}``, ``${primary_key}``, ...) in the
sink's options from it, and hands it to the sink (``Sink.catalog``), so the sink validates the
filled-in options and Assert can compare its catalog_table_rule. A sink of several tables is
built once per table (``table_routes``), each from its own table's catalog
(docs/design/multi-table.md).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from seatide.plugin.options import OptionError

if TYPE_CHECKING:
    from seatide.config.job import PluginSpec
    from seatide.plugin.schema import Schema

PLACEHOLDER = re.compile(r"\$\{(database_name|schema_name|table_name|schema_full_name|"
                         r"table_full_name|primary_key|unique_key|field_names)(?::([^}]*))?\}")
# These stand for several names: in a string they are joined with ",", and a list element
# that is exactly one of them becomes one element per name (primary_keys = ["${primary_key}"]).
_LISTS = ("primary_key", "unique_key", "field_names")


def keep_fields(schema: "Schema", mapping: Mapping[str, str]) -> "Schema":
    """``schema`` after a transform that outputs ``mapping`` (output name -> input name) only.

    Columns keep their metadata under their new names; a key is kept only when every one of
    its fields is output under its own name.
    """
    by_name = {c.name: c for c in schema.columns}
    columns = tuple(replace(by_name[src], name=dst) for dst, src in mapping.items() if src in by_name)
    same = {dst for dst, src in mapping.items() if dst == src}
    key = schema.primary_key
    if key is not None and not set(key.columns) <= same:
        key = None
    constraints = tuple(k for k in schema.constraint_keys if {c for c, _ in k.columns} <= same)
    old_row = schema.old_row
    if old_row is not None:     # the old values sent follow their columns' new names
        old_row = replace(old_row, columns=tuple(dst for dst, src in mapping.items() if src in old_row.columns))
    return replace(schema, columns=columns, primary_key=key, constraint_keys=constraints, old_row=old_row)


def shape_unknown(schema: "Schema") -> "Schema":
    """``schema`` after a transform whose output fields are known only at run time (Sql):
    the table name stays, the columns and keys are gone (and which columns an old row carries
    is unknown: ``check_change_keys`` cannot check a sink after it)."""
    return replace(schema, columns=(), primary_key=None, constraint_keys=(), old_row=None)


def check_change_keys(sink, catalog: "Schema | None") -> None:
    """Refuse a sink applying changes by keys its input's deleted and updated rows do not carry
    (``Schema.old_row``): such a DELETE arrives with its key NULL, matches no row and deletes
    nothing; an UPDATE of such a key leaves the old row. OptionError naming the sink's option."""
    found = sink.change_keys()
    if catalog is None or catalog.old_row is None or found is None:
        return
    option, keys = found
    sent = catalog.old_row.columns
    outside = [k for k in keys if k not in sent]
    if not outside:
        return
    table = f"table {catalog.table}" if catalog.table else "its input"
    raise OptionError(option, f"option '{option}' applies changes by {list(keys)}, but {table} sends only "
                      f"{list(sent)} of a deleted or updated row's old values ({', '.join(outside)} would "
                      "arrive NULL): a DELETE would delete nothing and an UPDATE of the key would leave the "
                      f"old row behind. Set {option} to columns among {list(sent)}, or {catalog.old_row.widen}")


def sink_tables(sources: list["PluginSpec"], transforms: list["PluginSpec"],
                names: list[str]) -> "list[Schema] | None":
    """The tables a sink receives, given the names in its ``plugin_input`` ([] = the plugin before
    it): one schema per table, in the tag order of its multi-table source (one for a single-table
    input); None when unknown (the source declares nothing, or the sink reads several inputs).

    Links that name nothing get None here; ``plan.dag.check_links`` reports them later.
    """
    by_output = {s.output: s for s in [*sources, *transforms] if s.output is not None}
    ordered = [*sources, *transforms]
    inputs: dict[str, PluginSpec | None] = {}
    for i, spec in enumerate(transforms):
        if spec.inputs:
            inputs[spec.plugin_id] = by_output.get(spec.inputs[0]) if len(spec.inputs) == 1 else None
        else:
            inputs[spec.plugin_id] = ordered[len(sources) + i - 1]

    def tables(spec: "PluginSpec | None", seen: frozenset[str] = frozenset()) -> "list[Schema] | None":
        if spec is None or spec.plugin_id in seen:        # a cycle: check_links reports it
            return None
        if spec.kind == "source":
            return spec.plugin.tables()        # a source asking its database asks it once
        upstream = tables(inputs.get(spec.plugin_id), seen | {spec.plugin_id})
        return None if upstream is None else [spec.plugin.catalog(table) for table in upstream]

    if len(names) > 1:
        return None
    if names:
        return tables(by_output.get(names[0]))
    return tables(ordered[-1]) if ordered else None


def sink_catalogs(sources: list["PluginSpec"], transforms: list["PluginSpec"],
                  sinks_inputs: list[list[str]]) -> list["Schema | None"]:
    """The catalog of each sink of a single-table input (None for several tables or unknown)."""
    found = [sink_tables(sources, transforms, names) for names in sinks_inputs]
    return [tables[0] if tables is not None and len(tables) == 1 else None for tables in found]


def build_sink(cls, body: Mapping[str, Any], tables: "list[Schema] | None", build):
    """The sink for ``body``: built from the one table it receives (its placeholders filled from
    that table's catalog), or, for several tables, once per table, the first carrying every
    table's route (``Sink.routes``). ``build(options, catalog)`` reads the options and makes
    the plugin."""
    if tables is None or len(tables) <= 1:
        catalog = tables[0] if tables else None
        return build(fill_placeholders(cls.table_defaults(body, catalog, False), catalog), catalog)
    routes = table_routes(tables, body, build, defaults=lambda table: cls.table_defaults(body, table, True))
    first = routes[0].sink
    first.routes = routes
    return first


def table_routes(tables: "list[Schema]", body: Mapping[str, Any], build, defaults=None) -> list:
    """The sink built once per table (``build(options, catalog)``), its options filled from that
    table's catalog; an option error names the table it was filled for."""
    from seatide.plugin.tables import TableRoute

    routes = []
    for index, table in enumerate(tables):
        try:
            given = defaults(table) if defaults is not None else body
            sink = build(fill_placeholders(given, table), table)
        except OptionError as exc:
            raise OptionError(exc.option, f"{exc.message} (writing table {table.table})") from None
        sink.table_name = table.table or f"table {index}"
        routes.append(TableRoute(index, sink.table_name, table, sink))
    return routes


def fill_placeholders(body: Mapping[str, Any], catalog: "Schema | None") -> dict[str, Any]:
    """``body`` with every sink placeholder replaced from ``catalog``; OptionError naming the option."""
    return {key: _fill(value, catalog, key) for key, value in body.items()}


def _fill(value: Any, catalog: "Schema | None", where: str) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: ",".join(_values(m, catalog, where)), value)
    if isinstance(value, list):
        filled: list[Any] = []
        for i, item in enumerate(value):
            match = PLACEHOLDER.fullmatch(item) if isinstance(item, str) else None
            if match and match.group(1) in _LISTS:
                filled.extend(_values(match, catalog, where))
            else:
                filled.append(_fill(item, catalog, where))
        return filled
    if isinstance(value, Mapping):
        return {k: _fill(v, catalog, f"{where}.{k}") for k, v in value.items()}
    return value


def _values(match: re.Match, catalog: "Schema | None", where: str) -> list[str]:
    name, default = match.group(1), match.group(2)
    found = None if catalog is None else _lookup(name, catalog)
    if found:
        return found
    if default is not None:
        return [default]
    if catalog is None:
        why = ("its input has no table metadata: the upstream source declares no schema "
               "(give it schema { table = ..., columns/fields ... }), or the sink reads several inputs")
    else:
        why = {"database_name": "the upstream table has no database (schema.table = \"db.table\")",
               "schema_name": "the upstream table has no schema (schema.table = \"db.schema.table\")",
               "schema_full_name": "the upstream table has no database or schema",
               "primary_key": "the upstream table has no primary key (schema.primaryKey), or a "
                              "transform dropped or renamed one of its fields",
               "unique_key": "the upstream table has no UNIQUE_KEY constraint (schema.constraintKeys), "
                             "or a transform dropped or renamed one of its fields",
               "field_names": "the upstream field names are known only at run time (after a Sql "
                              "transform, say)"}.get(name, "the upstream table has no name (schema.table)")
    fix = (f"write the value, or give a default: ${{{name}:value}}"
           if name in ("database_name", "schema_name", "table_name") else "write the value instead")
    raise OptionError(where, f"option '{where}': the placeholder {match.group(0)} cannot be filled: {why}; {fix}")


def _lookup(name: str, catalog: "Schema") -> list[str]:
    database, schema, table = catalog.table_path if catalog.table else (None, None, None)
    simple = {"database_name": database, "schema_name": schema, "table_name": table or None}
    if name in simple:
        return [simple[name]] if simple[name] else []
    if name == "schema_full_name":
        parts = [p for p in (database, schema) if p]
        return [".".join(parts)] if parts else []
    if name == "table_full_name":
        return [".".join(p for p in (database, schema, table) if p)] if table else []
    if name == "primary_key":
        return list(catalog.primary_key.columns) if catalog.primary_key else []
    if name == "unique_key":
        return [c for k in catalog.constraint_keys if k.kind == "UNIQUE_KEY" for c, _ in k.columns]
    return [c.name for c in catalog.columns]


__all__ = ["PLACEHOLDER", "fill_placeholders", "keep_fields", "shape_unknown", "sink_catalogs", "sink_tables",
           "build_sink", "table_routes"]
