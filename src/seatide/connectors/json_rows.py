"""A batch's rows as JSON objects, as SeaTunnel's ``format = json`` writes them, computed by Spark:
dates ``yyyy-MM-dd``, timestamps ISO-8601 local date-times, decimals as numbers, maps with their
keys as text. The sinks that send rows as JSON (Redis, Http) take them from here."""

from __future__ import annotations

from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind, user_columns

# Spark's JSON writer, set to SeaTunnel's text of dates and times.
JSON_OPTIONS = {"dateFormat": "yyyy-MM-dd", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
                "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS", "ignoreNullFields": "false"}


def rows_as_json(df, key_option: str, route: int):
    """``df``'s rows as (route, kind, seq, key, value) columns: ``key`` is the value of field
    ``key_option`` as text, or, when ``df`` has no such field, ``key_option`` itself."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from seatide.plugin.types import map_keys_as

    types = {f.name: f.dataType for f in df.schema.fields}
    fields = []
    for name in user_columns(df.columns):
        column = F.col(f"`{name}`")
        if isinstance(types[name], T.NullType):
            column = column.cast("string")
        fields.append(map_keys_as(column, types[name], to_text=True).alias(name))
    key = F.col(f"`{key_option}`").cast("string") if key_option in df.columns else F.lit(key_option)
    kind = F.col(ROW_KIND_COLUMN) if ROW_KIND_COLUMN in df.columns else F.lit(int(RowKind.INSERT))
    seq = F.col(ROW_SEQ_COLUMN) if ROW_SEQ_COLUMN in df.columns else F.lit(None).cast("long")
    value = F.to_json(F.struct(*fields), JSON_OPTIONS) if fields else F.lit("{}")
    return df.select(F.lit(route).alias("route"), kind.cast("int").alias("kind"), seq.alias("seq"),
                     key.alias("key"), value.alias("value"))


__all__ = ["JSON_OPTIONS", "rows_as_json"]
