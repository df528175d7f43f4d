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

from seatide.plugin.rowkind import RowKind

REMOVING = (RowKind.DELETE, RowKind.UPDATE_BEFORE)


@dataclass(frozen=True)
class Command:
    data_type: str
    remove: bool
    key: bytes
    value: str          # the row's JSON object
    expire: int = -1    # seconds its key lives after it is written (its route's option); -1: for ever


def hash_fields(value: str) -> dict[str, str]:
    """A row's JSON object as a hash's fields: strings as they are, other values as JSON; nulls left out."""
    fields = {}
    for name, item in json.loads(value).items():
        if item is not None:
            fields[name] = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
    return fields


def queue(pipe, command: Command) -> None:
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
    if command.expire > 0:
        pipe.expire(key, command.expire)


__all__ = ["Command", "REMOVING", "hash_fields", "queue"]
