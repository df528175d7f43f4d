"""Redis source: SeaTunnel's ``Redis`` source options; the keys a pattern matches, read once.

Keys are found with SCAN (``keys`` is its MATCH pattern, ``batch_size`` its COUNT), then read as
their data type says: a string key is one value, a list, set or sorted set one value per member
(a sorted set in score order), and a hash one row (``hash_key_parse_mode = all``: its fields are
the row's fields) or one row per field (``kv``: the field's name in ``hash_key``, its value the
row). With ``format = json`` a value is a JSON object parsed by Spark into ``schema``'s fields;
with ``text`` it is one field, ``content``.

BATCH jobs only, as SeaTunnel's Redis source is a batch source: Redis keeps no change log to
stream from or resume in. With ``checkpoint.interval`` the read is one scan, one micro-batch
(``scan_stream``): no position within the keys to resume from. A key that changes while it is
read is read as it was at that moment; keys of another data type than ``data_type`` are skipped, and
counted in the log.
"""

from __future__ import annotations

import json

from seatide.connectors.redis.options import SOURCE, check_connection
from seatide.connectors.redis.scan import scanned_values
from seatide.plugin.base import PermanentError, ReadContext, Source
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.schema import Schema, read_schema

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

        from seatide.connectors.redis.scan_stream import SCHEMA

        if ctx.unbounded:
            raise RedisSourceError("Redis source: reads BATCH jobs only (Redis keeps no change log to stream "
                                   "from); set job.mode = BATCH")
        if ctx.micro_batch:
            raw = self._scanned(ctx)
        else:
            raw = ctx.spark.createDataFrame(scanned_values(self.opts), SCHEMA)
        return self._parsed(raw).withColumn(ROW_KIND_COLUMN, F.lit(0).cast("tinyint"))

    def _scanned(self, ctx: ReadContext):
        """A checkpointed BATCH job's stream: one scan, one batch (``scan_stream``)."""
        from seatide.connectors.redis.scan_stream import SCHEMA, SOURCE_NAME, RedisScanDataSource
        from seatide.plugin.base import use_python_data_source

        use_python_data_source(ctx.spark, RedisScanDataSource)
        given = {key: self.opts[key] for key in (o.key for o in SOURCE) if self.opts[key] is not None}
        return (ctx.spark.readStream.format(SOURCE_NAME).options(options_json=json.dumps(given))
                .schema(SCHEMA).load())

    def _parsed(self, raw):
        """The values read (``hash_key``, ``value``) as rows of ``schema()``, parsed by Spark."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        kv = self.opts["data_type"] == "hash" and self.opts["hash_key_parse_mode"] == "kv"
        whole_hash = self.opts["data_type"] == "hash" and not kv
        if whole_hash:
            raw = raw.select(F.from_json(F.col("value"), T.MapType(T.StringType(), T.StringType())).alias("fields"))
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
