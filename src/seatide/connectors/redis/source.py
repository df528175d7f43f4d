"""Redis source: SeaTunnel's ``Redis`` source options; the keys a pattern matches, read once.

Keys are found with SCAN (``keys`` is its MATCH pattern, ``batch_size`` its COUNT), then read as
their data type says: a string key is one value, a list, set or sorted set one value per member
(a sorted set in score order), and a hash one row (``hash_key_parse_mode = all``: its fields are
the row's fields) or one row per field (``kv``: the field's name in ``hash_key``, its value the
row). With ``format = json`` a value is a JSON object parsed by Spark into ``schema``'s fields;
with ``text`` it is one field, ``content``.

BATCH jobs without ``checkpoint.interval`` only, as SeaTunnel's Redis source is a batch source:
Redis keeps no change log to stream from or resume in. A key that changes while it is read is
read as it was at that moment; keys of another data type than ``data_type`` are skipped, and
counted in the log.
"""

from __future__ import annotations

import logging

from seatide.connectors.redis.options import SOURCE, RedisError, check_connection, connect
from seatide.plugin.base import PermanentError, ReadContext, Source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.schema import Schema, read_schema

log = logging.getLogger(__name__)

REDIS_TYPES = {"key": b"string", "hash": b"hash", "list": b"list", "set": b"set", "zset": b"zset"}


class RedisSourceError(PermanentError):
    pass


@register
class RedisSource(Source):
    plugin_name = "Redis"
    options = SOURCE

    def check(self) -> None:
        check_connection(self)
        self._catalog = read_schema(self.opts, check_keys=self.check_keys)
        if self.opts["format"] == "json" and self._catalog is None:
            raise self.invalid("schema.fields", "format = json needs a schema: schema { fields { name = string, "
                                                "age = int } } (or format = text: each value one field, content)")
        if self.opts["batch_size"] < 1:
            raise self.invalid("batch_size", f"option 'batch_size' must be 1 or more, got {self.opts['batch_size']}")

    def declared_schema(self) -> Schema | None:
        return self._catalog

    def schema(self):
        from pyspark.sql import types as T

        if self.opts["format"] == "text":
            fields = [T.StructField("content", T.StringType())]
        else:
            fields = list(self._catalog.struct.fields)
        if self.opts["data_type"] == "hash" and self.opts["hash_key_parse_mode"] == "kv":
            fields.insert(0, T.StructField("hash_key", T.StringType()))
        return T.StructType(fields)

    def read(self, ctx: ReadContext):
        from pyspark.sql import functions as F

        if ctx.micro_batch:
            raise RedisSourceError("Redis source: reads BATCH jobs without checkpoint.interval (Redis keeps no "
                                   "change log to stream or resume from); remove checkpoint.interval")
        values = self._values()
        df = self._parsed(ctx.spark, values)
        return df.withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))

    def _values(self) -> list[tuple]:
        """Every value read: (hash_key or None, text) or, for a whole hash, (None, {field: text})."""
        import redis

        opts = self.opts
        data_type, wanted = opts["data_type"], REDIS_TYPES[opts["data_type"]]
        client = connect(opts)
        out, skipped = [], 0
        try:
            for key in client.scan_iter(match=opts["keys"], count=opts["batch_size"]):
                try:
                    if client.type(key) != wanted:
                        skipped += 1
                        continue
                    out += self._read_key(client, key, data_type)
                except redis.RedisError as exc:
                    raise RedisError(f"Redis source: key {key!r} could not be read: {exc}") from None
        finally:
            client.close()
        if skipped:
            log.info("Redis source: %d keys matching %r hold another data type than %s; skipped",
                     skipped, opts["keys"], data_type)
        return out

    def _read_key(self, client, key: bytes, data_type: str) -> list[tuple]:
        text = lambda b: b.decode("utf-8")      # noqa: E731
        if data_type == "key":
            value = client.get(key)
            return [] if value is None else [(None, text(value))]
        if data_type == "hash":
            fields = {text(k): text(v) for k, v in client.hgetall(key).items()}
            if self.opts["hash_key_parse_mode"] == "kv":
                return [(name, value) for name, value in fields.items()]
            return [(None, fields)] if fields else []
        if data_type == "list":
            members = client.lrange(key, 0, -1)
        elif data_type == "set":
            members = sorted(client.smembers(key))
        else:
            members = client.zrange(key, 0, -1)
        return [(None, text(m)) for m in members]

    def _parsed(self, spark, values: list[tuple]):
        """The values as rows of ``schema()``, parsed by Spark."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        kv = self.opts["data_type"] == "hash" and self.opts["hash_key_parse_mode"] == "kv"
        whole_hash = self.opts["data_type"] == "hash" and not kv
        if whole_hash:
            raw = spark.createDataFrame([(v,) for _, v in values],
                                        T.StructType([T.StructField("fields", T.MapType(T.StringType(), T.StringType()))]))
        else:
            raw = spark.createDataFrame(values, T.StructType([T.StructField("hash_key", T.StringType()),
                                                              T.StructField("value", T.StringType())]))
        head = [F.col("hash_key")] if kv else []
        if self.opts["format"] == "text":
            text = F.to_json(F.col("fields")) if whole_hash else F.col("value")
            return raw.select(*head, text.alias("content"))
        struct = self._catalog.struct
        if whole_hash:
            # A hash's fields are text: each is cast to its field's type (a nested one parsed as JSON).
            columns = [(F.from_json(F.col("fields")[f.name], f.dataType) if isinstance(
                f.dataType, (T.ArrayType, T.MapType, T.StructType)) else F.col("fields")[f.name].cast(f.dataType)
                ).alias(f.name) for f in struct.fields]
            return raw.select(*columns)
        parsed = F.from_json(F.col("value"), struct, {"mode": "PERMISSIVE"})
        return raw.select(*head, parsed.alias("row")).select(*head, *[F.col(f"row.`{f.name}`") for f in struct.fields])


__all__ = ["RedisSource", "RedisSourceError"]
