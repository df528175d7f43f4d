"""JsonPath: extract typed fields from JSON text (or from array, map and row fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import LIST, REQUIRED, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.transforms.fields import (TransformInputError, column, dedupe_check, put_fields,
                                       require_fields)
from seatide.transforms.lenient_json import with_readable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

# The JSONPath subset Spark's get_json_object evaluates: $, .key, ['key'], [n], [*].
_PATH = re.compile(r"\$(?:\.[^.\[\]*]+|\[\d+\]|\[\*\]|\['[^']+'\])*")
_COLUMN_KEYS = ("src_field", "path", "dest_field", "dest_type", "column_error_handle_way")
_WAYS = ("FAIL", "SKIP", "SKIP_ROW")
_SHOWN_CHARS = 200
_HIDDEN = "__seatide_json_"       # working columns, dropped before the output


@dataclass(frozen=True)
class JsonColumn:
    """One extracted field; ``on_error`` None means the row-level way applies."""

    src_field: str
    path: str
    dest_field: str
    type_name: str
    dest_type: "DataType"
    on_error: str | None


@register
class JsonPath(Transform):
    """Reads values out of JSON with JSONPath and adds them as typed fields.

    ``columns`` lists ``{src_field, path, dest_field, dest_type = string,
    column_error_handle_way}``; several fields from one source may be written at once
    with ``;``-separated path, dest_field and dest_type. The source is JSON text (string
    or bytes), or an array, map or row field (a row reads as an array of its values,
    so ``$[0]`` is its first field). Paths use the subset Spark evaluates: ``$.a.b``,
    ``$['a b']``, ``$.a[0]``, ``$.a[*].b``. A path that finds nothing gives NULL.

    The JSON is read as SeaTunnel's parser reads it: strict JSON, and also keys and values
    without quotes, single quotes and extra commas (``transforms/lenient_json.py``).

    Errors are source text that is not JSON and values that do not convert to
    ``dest_type``: ``FAIL`` stops the job naming the field and value, ``SKIP`` drops the
    row (``row_error_handle_way``) or nulls the field (``column_error_handle_way``), and
    ``SKIP_ROW`` drops the row.
    """

    plugin_name = "JsonPath"
    options = (
        Option("columns", LIST, REQUIRED,
               "fields to extract: [{src_field, path, dest_field, dest_type, column_error_handle_way}]"),
        Option("row_error_handle_way", enum(*_WAYS), "FAIL",
               "on a JSON or conversion error: FAIL the job, or SKIP (drop) the row"),
    )

    def check(self) -> None:
        entries = self.opts["columns"]
        if not entries:
            raise self.invalid("columns", "JsonPath: columns is empty; list at least one "
                                          "{src_field, path, dest_field}")
        self._columns = [c for i, entry in enumerate(entries) for c in self._read_entry(i, entry)]
        dedupe_check("JsonPath", "columns", [c.dest_field for c in self._columns])

    def _read_entry(self, index: int, entry: Any) -> list[JsonColumn]:
        where = f"columns[{index}]"
        if not isinstance(entry, dict):
            raise self.invalid("columns", f"JsonPath: {where} must be an object such as "
                               "{src_field = data, path = \"$.a\", dest_field = a}")
        self.check_keys(entry, _COLUMN_KEYS, where)
        for key in ("src_field", "path", "dest_field"):
            if not str(entry.get(key, "")).strip():
                raise self.invalid("columns", f"JsonPath: {where}.{key} is missing or empty")
        paths = [p.strip() for p in str(entry["path"]).split(";")]
        dests = [d.strip() for d in str(entry["dest_field"]).split(";")]
        types = [t.strip() for t in str(entry.get("dest_type", "string")).split(";")]
        if len(paths) > 1 or len(dests) > 1:
            if "dest_type" not in entry or not len(paths) == len(dests) == len(types):
                raise self.invalid("columns", f"JsonPath: {where} extracts several fields at "
                                   f"once, so path ({len(paths)}), dest_field ({len(dests)}) and "
                                   f"dest_type ({len(types) if 'dest_type' in entry else 0}) need "
                                   "the same number of ';'-separated items")
        way = self._column_way(where, entry.get("column_error_handle_way"))
        return [self._column(where, str(entry["src_field"]).strip(), path, dest, type_name, way)
                for path, dest, type_name in zip(paths, dests, types)]

    def _column_way(self, where: str, value: Any) -> str | None:
        if value is None:
            return None
        way = str(value).strip().upper()
        if way not in _WAYS:
            raise self.invalid("columns", f"JsonPath: {where}.column_error_handle_way must be one "
                               f"of {', '.join(_WAYS)}, got {value!r}")
        return way

    def _column(self, where: str, src: str, path: str, dest: str, type_name: str,
                way: str | None) -> JsonColumn:
        from seatide.plugin.types import SchemaError, parse_type

        if not _PATH.fullmatch(path):
            raise self.invalid("columns", f"JsonPath: {where}.path '{path}' is not a JSONPath "
                               "SeaTide can evaluate; use $ followed by .key, ['key'], [0] or [*] "
                               "(no .., filters, slices or .*)")
        if dest == ROW_KIND_COLUMN:
            raise self.invalid("columns", f"JsonPath: {where}.dest_field cannot be "
                               f"'{ROW_KIND_COLUMN}', a name SeaTide reserves for the row kind")
        try:
            dest_type = parse_type(type_name or "string")
        except SchemaError as exc:
            raise self.invalid("columns", f"JsonPath: {where}.dest_type: {exc}") from None
        return JsonColumn(src, path, dest, type_name or "string", dest_type, way)

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        from pyspark.sql import functions as F

        require_fields("JsonPath", "columns", {c.src_field for c in self._columns}, df)
        # Each source's JSON text and its "is JSON" flag as columns of their own: every extracted
        # field reads them, and a column is computed once where an expression would be copied
        texts, hidden = {}, []
        for i, src in enumerate(sorted({c.src_field for c in self._columns})):
            df, added = self._json_text(df, src, f"{_HIDDEN}{i}")
            texts[src] = (column(added[-2]), column(added[-1]))
            hidden += added
        row_way = self.opts["row_error_handle_way"]
        values: dict[str, Column] = {}
        drop_row = F.lit(False)
        for spec in self._columns:
            text, is_json = texts[spec.src_field]
            value, error = _extract(text, is_json, spec)
            way = spec.on_error or ("FAIL" if row_way == "FAIL" else "SKIP_ROW")
            if way == "SKIP_ROW":
                drop_row = drop_row | error
            elif way == "SKIP":
                value = F.when(~error, value)
            else:
                value = F.when(error, F.raise_error(_error_message(text, is_json, spec))).otherwise(value)
            values[spec.dest_field] = value
        return put_fields(df.where(~drop_row), values).drop(*hidden)

    def _json_text(self, df: "DataFrame", src: str, name: str) -> tuple["DataFrame", list[str]]:
        """``df`` with the source field as JSON text (column ``name``) and whether each row's
        text is JSON (``name + "_is_json"``, last); returns the columns added."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        data_type = df.schema[src].dataType
        if isinstance(data_type, (T.StringType, T.BinaryType)):
            return with_readable(df, column(src).cast("string"), name)
        if isinstance(data_type, (T.ArrayType, T.MapType)):
            text = F.to_json(column(src))
        elif isinstance(data_type, T.StructType):
            text = _row_as_json_array(column(src), data_type)
        else:
            raise TransformInputError(
                "columns", f"JsonPath: src_field '{src}' is {data_type.simpleString()}; it must be "
                "a string or bytes holding JSON, or an array, map or row")
        return df.withColumns({name: text, f"{name}_is_json": F.lit(True)}), [name, f"{name}_is_json"]


def _extract(text: "Column", is_json: "Column", spec: JsonColumn) -> tuple["Column", "Column"]:
    """The converted value and an error flag: the row's text is not JSON or the value does not convert."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    raw = F.get_json_object(text, spec.path)
    if isinstance(spec.dest_type, T.StringType):
        value = raw
    elif isinstance(spec.dest_type, (T.ArrayType, T.MapType, T.StructType)):
        value = F.from_json(raw, spec.dest_type)
    else:
        value = raw.try_cast(spec.dest_type)
    error = ~is_json | (raw.isNotNull() & value.isNull())
    return value, error


def _error_message(text: "Column", is_json: "Column", spec: JsonColumn) -> "Column":
    from pyspark.sql import functions as F

    where = (f"JsonPath: field '{spec.dest_field}' (path {spec.path}, type {spec.type_name}) "
             f"from '{spec.src_field}': ")
    problem = F.when(~is_json, F.lit("the source is not valid JSON"))\
        .otherwise(F.lit(f"the value does not convert to {spec.type_name}"))
    hint = "; set row_error_handle_way = SKIP to drop such rows. Source: "
    return F.concat(F.lit(where), problem, F.lit(hint), F.substring(text, 1, _SHOWN_CHARS))


def _row_as_json_array(row: "Column", data_type) -> "Column":
    """SeaTunnel reads a row as the JSON array of its field values."""
    from pyspark.sql import functions as F

    options = {"ignoreNullFields": "false"}
    parts = [F.regexp_extract(F.to_json(F.struct(row.getField(f.name).alias("v")), options),
                              r'(?s)^\{"v":(.*)\}$', 1)
             for f in data_type.fields]
    return F.when(row.isNotNull(), F.concat(F.lit("["), F.concat_ws(",", *parts), F.lit("]")))
