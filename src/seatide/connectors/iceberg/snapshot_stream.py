"""A Python streaming data source over an Iceberg table's snapshots (micro-batches).

Offsets are positions (``positions``): the checkpointed position of the read is a snapshot id
and how many of its files were read. Each micro-batch's files are read by Spark's Python
workers with pyarrow, one partition per group of files, so rows never pass the driver.
The class lives in an importable module because Spark's Python workers unpickle it.
"""

from __future__ import annotations

import json
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

SOURCE_NAME = "seatide_iceberg_snapshots"


class FileGroup(InputPartition):
    def __init__(self, paths: list[str]):
        super().__init__(paths)
        self.paths = paths


class IcebergSnapshotSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.options["schema_json"]))

    def streamReader(self, schema) -> "IcebergSnapshotReader":
        return IcebergSnapshotReader(self.options, schema)


class IcebergSnapshotReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema):
        self.options = dict(options)
        self.schema = schema
        self.catalog_config = json.loads(options["catalog"])
        self.identifier = tuple(json.loads(options["identifier"]))
        self.branch = options.get("branch") or None
        self.initial = json.loads(options["initial"])
        self.bounded_head = json.loads(options.get("bounded_head", "null"))   # a bounded read ends here
        self.max_rows = int(options.get("max_rows", "0")) or None
        self.partition_count = max(1, int(options.get("partitions", "1")))
        self._target = None

    def _table(self):
        from seatide.connectors.iceberg.catalogs import load_catalog

        return load_catalog(self.options.get("catalog_name", "default"), self.catalog_config).load_table(self.identifier)

    def _head(self, table) -> int | None:
        if self.bounded_head is not None:
            return self.bounded_head
        snapshot = table.metadata.snapshot_by_name(self.branch or "main")
        return snapshot.snapshot_id if snapshot is not None else None

    def initialOffset(self) -> dict:
        return self.initial

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        table = self._table()
        self._target = self._head(table)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from seatide.connectors.iceberg.positions import advance

        table = self._table()
        head = self._target if self._target is not None else self._head(table)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return advance(table, start, head, max_rows)

    def partitions(self, start: dict, end: dict) -> list[FileGroup]:
        from seatide.connectors.iceberg.positions import between

        found = between(self._table(), start, end)
        if not found:
            return []
        parts = min(len(found), self.partition_count)
        return [FileGroup([u.path for u in found[i::parts]]) for i in range(parts)]

    def read(self, partition: FileGroup) -> Iterator:
        from seatide.connectors.iceberg.arrow_read import read_files

        yield from read_files(partition.paths, self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to release: the table keeps its snapshots."""


def stream_options(*, catalog_name: str, catalog: dict, identifier: tuple, branch: str | None, initial: dict,
                   bounded_head: int | None, max_rows: int, partitions: int, schema_json: str) -> dict[str, str]:
    return {"catalog_name": catalog_name, "catalog": json.dumps(catalog), "identifier": json.dumps(list(identifier)),
            "branch": branch or "", "initial": json.dumps(initial), "bounded_head": json.dumps(bounded_head),
            "max_rows": str(max_rows), "partitions": str(partitions), "schema_json": schema_json}


__all__ = ["IcebergSnapshotSource", "SOURCE_NAME", "stream_options"]
