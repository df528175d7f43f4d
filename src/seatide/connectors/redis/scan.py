"""The Redis source's read of its keys: SCAN MATCH, then each key as its data type says. Its own
module because Spark's Python workers run it too (``scan_stream``: a checkpointed job's batch)."""

from __future__ import annotations

import json
import logging

from seatide.connectors.redis.options import RedisError, connect

log = logging.getLogger(__name__)

REDIS_TYPES = {"key": b"string", "hash": b"hash", "list": b"list", "set": b"set", "zset": b"zset"}


def scanned_values(opts) -> list[tuple]:
    """Every value read, as (hash_key or None, text); a whole hash's text is its fields as a JSON object."""
    import redis

    data_type, wanted = opts["data_type"], REDIS_TYPES[opts["data_type"]]
    client = connect(opts)
    out, skipped = [], 0
    try:
        for key in client.scan_iter(match=opts["keys"], count=opts["batch_size"]):
            try:
                if client.type(key) != wanted:
                    skipped += 1
                    continue
                out += _read_key(client, key, data_type, opts["hash_key_parse_mode"])
            except redis.RedisError as exc:
                raise RedisError(f"Redis source: key {key!r} could not be read: {exc}") from None
    finally:
        client.close()
    if skipped:
        log.info("Redis source: %d keys matching %r hold another data type than %s; skipped",
                 skipped, opts["keys"], data_type)
    return out


def _read_key(client, key: bytes, data_type: str, hash_mode: str) -> list[tuple]:
    text = lambda b: b.decode("utf-8")      # noqa: E731
    if data_type == "key":
        value = client.get(key)
        return [] if value is None else [(None, text(value))]
    if data_type == "hash":
        fields = {text(k): text(v) for k, v in client.hgetall(key).items()}
        if hash_mode == "kv":
            return [(name, value) for name, value in fields.items()]
        return [(None, json.dumps(fields))] if fields else []
    if data_type == "list":
        members = client.lrange(key, 0, -1)
    elif data_type == "set":
        members = sorted(client.smembers(key))
    else:
        members = client.zrange(key, 0, -1)
    return [(None, text(m)) for m in members]


__all__ = ["REDIS_TYPES", "scanned_values"]
