"""What a batch's rows become in Redis: one command per row, in the order the rows changed.

A row's key is the value of the field the ``key`` option names, or, when the input has no such
field, the option's text itself (SeaTunnel's rule). Its value is the row as a JSON object
(SeaTunnel's ``format = json``): dates ``yyyy-MM-dd``, timestamps ISO-8601 local date-times,
decimals as numbers, maps with their keys as text. What each data type does:

========= ============================== ===================================
data_type insert / update (after)        delete / update (before)
========= ============================== ===================================
key       SET key value                  DEL key
hash      HSET key field text ...        HDEL key field ...
list      RPUSH key value                LREM key 1 value (its first copy)
set       SADD key value                 SREM key value
zset      ZADD key 1 value               ZREM key value
========= ============================== ===================================

A hash gets each non-null field of the row as a field of its own, its value as text (a string
as it is, other values as JSON). Every command but RPUSH leaves the same state when a batch is
written twice; the sink writes a batch once (``target.py``), so a list gets each row once too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind, user_columns

# Spark's JSON writer, set to SeaTunnel's text of dates and times.
JSON_OPTIONS = {"dateFormat": "yyyy-MM-dd", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
                "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS", "ignoreNullFields": "false"}
REMOVING = (RowKind.DELETE, RowKind.UPDATE_BEFORE)


@dataclass(frozen=True)
class Command:
    data_type: str
    remove: bool
    key: bytes
    value: str          # the row's JSON object


def rows_as_json(df, key_option: str, route: int):
    """``df``'s rows as (route, kind, seq, key, json) columns, computed by Spark."""
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


def hash_fields(value: str) -> dict[str, str]:
    """A row's JSON object as a hash's fields: strings as they are, other values as JSON; nulls left out."""
    fields = {}
    for name, item in json.loads(value).items():
        if item is not None:
            fields[name] = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
    return fields


def queue(pipe, command: Command, expire: int) -> None:
    """``command`` added to a transaction (``pipe`` after ``multi()``), with its key's expiry."""
    key, value = command.key, command.value
    kind = command.data_type
    if command.remove:
        if kind == "key":
            pipe.delete(key)
        elif kind == "hash":
            names = list(json.loads(value))
            if names:
                pipe.hdel(key, *names)
        elif kind == "list":
            pipe.lrem(key, 1, value)
        elif kind == "set":
            pipe.srem(key, value)
        else:
            pipe.zrem(key, value)
        return
    if kind == "key":
        pipe.set(key, value)
    elif kind == "hash":
        fields = hash_fields(value)
        if not fields:
            return
        pipe.hset(key, mapping=fields)
    elif kind == "list":
        pipe.rpush(key, value)
    elif kind == "set":
        pipe.sadd(key, value)
    else:
        pipe.zadd(key, {value: 1})
    if expire > 0:
        pipe.expire(key, expire)


__all__ = ["Command", "JSON_OPTIONS", "REMOVING", "hash_fields", "queue", "rows_as_json"]
