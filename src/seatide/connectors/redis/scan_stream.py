"""A PySpark Python data source that scans Redis once: a checkpointed BATCH job's one batch.

The offset is ``{"scan": n}``: 0 before, 1 once the scan is admitted; then the stream ends. Redis
keeps no change log, so there is no position within the keys to bound a batch by rows or resume
within: a batch replayed after a crash scans again and reads the keys of then (the sinks' record
of a decided batch keeps it from being written twice); a scan never decided reads the keys of
when it runs. The classes live in an importable module because Spark's Python workers unpickle them.
"""

from __future__ import annotations

import json
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow

SOURCE_NAME = "seatide_redis_scan"
SCHEMA = "hash_key string, value string"


class RedisScanDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return SCHEMA

    def streamReader(self, schema) -> "RedisScanReader":
        return RedisScanReader(self.options)


class RedisScanReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.options = dict(options)

    def initialOffset(self) -> dict:
        return {"scan": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """One scan whatever the trigger: the offset below is already bounded."""

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"scan": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(n) for n in range(int(start["scan"]), int(end["scan"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from seatide.connectors.redis.options import SOURCE
        from seatide.connectors.redis.scan import scanned_values
        from seatide.plugin.options import read_options

        yield from scanned_values(read_options(json.loads(self.options["options_json"]), SOURCE))

    def commit(self, end: dict) -> None:
        """Nothing to release: Redis keeps nothing for SeaTide."""


__all__ = ["RedisScanDataSource", "SCHEMA", "SOURCE_NAME"]
