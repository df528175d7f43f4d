"""PySpark Python data sources over a Paimon table: a batch read of one snapshot, and a stream of
its snapshots (micro-batches). The classes live in an importable module because Spark's Python
workers unpickle them.

The stream's offset is ``{"snapshot": id}``: every snapshot up to ``id`` has been read (``scan``).
Its first batch reads the table as of the newest snapshot when it starts; later batches read what
each new snapshot added. Spark's offset log holds the range of each batch, so a restarted query
replays a batch over the same snapshots and goes on after the last committed one: no snapshot
is read twice.
"""

from __future__ import annotations

import json
import pickle
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

SOURCE_NAME = "seatide_paimon"


class SplitGroup(InputPartition):
    """Some splits of one read, pickled (pypaimon's split objects), and whether they are changes."""

    def __init__(self, splits: bytes, changes: bool):
        super().__init__(splits)
        self.splits = splits
        self.changes = changes


class PaimonDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.options["schema_json"]))

    def reader(self, schema) -> "PaimonBatchReader":
        return PaimonBatchReader(self.options, schema)

    def streamReader(self, schema) -> "PaimonStreamReader":
        return PaimonStreamReader(self.options, schema)


class _Reading:
    def __init__(self, options, schema):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = dict(options)
        self.schema = schema
        self.arrow = to_arrow_schema(schema)
        self.partition_count = max(1, int(self.options.get("partitions", "1")))

    def _table(self):
        from seatide.connectors.paimon.scan import open_table

        return open_table(self.options["warehouse"], self.options["database"], self.options["table"])

    def _partitions(self, splits: list, changes: bool) -> list[SplitGroup]:
        from seatide.connectors.paimon.scan import groups

        return [SplitGroup(pickle.dumps(group), changes) for group in groups(splits, self.partition_count)]

    def read(self, partition: SplitGroup) -> Iterator:
        from seatide.connectors.paimon.scan import read_splits

        yield from read_splits(self.options, pickle.loads(partition.splits), partition.changes, self.arrow)


class PaimonBatchReader(_Reading, DataSourceReader):
    def partitions(self) -> list[SplitGroup]:
        from seatide.connectors.paimon.scan import snapshot_splits

        return self._partitions(snapshot_splits(self._table(), int(self.options["snapshot"])), False)


class PaimonStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema):
        super().__init__(options, schema)
        self.bounded_head = json.loads(self.options.get("bounded_head", "null"))   # a bounded read ends here
        self.max_rows = int(self.options.get("max_rows", "0")) or None
        self._target = None

    def _head(self, table) -> int:
        from seatide.connectors.paimon.scan import head

        return self.bounded_head if self.bounded_head is not None else head(table)

    def initialOffset(self) -> dict:
        return {"snapshot": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._head(self._table())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from seatide.connectors.paimon.scan import advance

        table = self._table()
        upto = self._target if self._target is not None else self._head(table)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return {"snapshot": advance(table, int(start["snapshot"]), upto, max_rows)}

    def partitions(self, start: dict, end: dict) -> list[SplitGroup]:
        from seatide.connectors.paimon.scan import delta_splits, snapshot_splits

        first, last = int(start["snapshot"]), int(end["snapshot"])
        if last <= first:
            return []
        table = self._table()
        if first == 0:
            return self._partitions(snapshot_splits(table, last), False)
        return self._partitions(delta_splits(table, first, last), True)

    def commit(self, end: dict) -> None:
        """Nothing to release: the table keeps its snapshots (for as long as its options say)."""


def source_options(*, warehouse: str, database: str, table: str, schema_json: str, partitions: int,
                   snapshot: int = 0, bounded_head: int | None = None, max_rows: int = 0) -> dict[str, str]:
    return {"warehouse": warehouse, "database": database, "table": table, "schema_json": schema_json,
            "partitions": str(partitions), "snapshot": str(snapshot), "bounded_head": json.dumps(bounded_head),
            "max_rows": str(max_rows)}


__all__ = ["PaimonDataSource", "SOURCE_NAME", "source_options"]
