"""Planning a Paimon table's reads (on the driver) and reading its splits (in Spark's Python workers).

A read's position is a snapshot id: every snapshot up to it has been read. From position 0 the
first read is the table as of a snapshot (its splits: the rows merged by key, all inserts);
from position p to q it is what the snapshots after p up to q added (Paimon's delta files, or
its changelog files when the table has a changelog producer), each row with its kind. Splits are
pypaimon's own objects, pickled into Spark's partitions; a partition reads its splits with
pypaimon's reader and yields Arrow batches of exactly the Spark row type (DESIGN.md §10).

Rows carry ``__row_seq`` (plugin/rowkind.py), the order of the table's changes: the snapshot's
id, then the split's place among the snapshot's splits (numbered on the driver), then the row's
place in its split, so that a keyed sink orders one key's changes across snapshots and splits.
"""

from __future__ import annotations

from typing import Iterator

from seatide.connectors.paimon.warehouse import open_catalog, table_or_fail
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN

_KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
_PAIMON_KIND = "_row_kind"
# __row_seq = snapshot << _SNAPSHOT_SHIFT | split << _SPLIT_SHIFT | row in split
_SNAPSHOT_SHIFT, _SPLIT_SHIFT = 40, 28


def open_table(warehouse: str, database: str, table: str):
    return table_or_fail(open_catalog(warehouse), database, table, "Paimon source")


def head(table) -> int:
    snapshot = table.snapshot_manager().get_latest_snapshot()
    return snapshot.id if snapshot is not None else 0


def _follow_up(table):
    from pypaimon.read.streaming_table_scan import AsyncStreamingTableScan

    return AsyncStreamingTableScan(table, prefetch_enabled=False)


def snapshot_splits(table, snapshot_id: int) -> list[tuple[int, object]]:
    """The splits of the table as of ``snapshot_id`` (its rows merged by key), each with its order."""
    if snapshot_id <= 0:
        return []
    splits = table.copy({"scan.snapshot-id": str(snapshot_id)}).new_read_builder().new_scan().plan().splits()
    return [(i << _SPLIT_SHIFT, split) for i, split in enumerate(splits)]


def delta_splits(table, after: int, upto: int) -> list[tuple[int, object]]:
    """The splits of what the snapshots after ``after`` up to ``upto`` added, each with its order
    (compactions and other maintenance commits add no rows and are skipped)."""
    scan = _follow_up(table)
    manager = table.snapshot_manager()
    found = []
    for snapshot_id in range(after + 1, upto + 1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:
            from seatide.connectors.paimon.warehouse import PaimonError

            raise PaimonError(f"Paimon source: snapshot {snapshot_id} of {table.identifier} has expired before it "
                              "was read; keep snapshots longer (snapshot.time-retained) than the job may stop")
        if scan.follow_up_scanner.should_scan(snapshot):
            splits = scan._create_follow_up_plan(snapshot).splits()
            found += [(snapshot_id << _SNAPSHOT_SHIFT | i << _SPLIT_SHIFT, s) for i, s in enumerate(splits)]
    return found


def advance(table, start: int, upto: int, max_rows: int | None) -> int:
    """How far one batch reads from ``start`` towards ``upto``: every snapshot, or (``max_rows``)
    whole snapshots until they hold about that many rows (at least one)."""
    if start == 0 or not max_rows or upto <= start:
        return upto
    manager, rows = table.snapshot_manager(), 0
    for snapshot_id in range(start + 1, upto + 1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        rows += (snapshot.delta_record_count or 0) if snapshot is not None else 0
        if rows >= max_rows:
            return snapshot_id
    return upto


def groups(splits: list, count: int) -> list[list]:
    """``splits`` in at most ``count`` groups of about equal rows (a Spark partition each)."""
    count = max(1, min(count, len(splits)))
    buckets: list[list] = [[] for _ in range(count)]
    weights = [0] * count
    for item in sorted(splits, key=lambda s: -(getattr(s[1], "row_count", 0) or 0)):
        at = weights.index(min(weights))
        buckets[at].append(item)
        weights[at] += getattr(item[1], "row_count", 0) or 1
    return [b for b in buckets if b]


def read_splits(options: dict, splits: list, changes: bool, arrow_schema) -> Iterator:
    """Rows of ``splits`` ((order, split) pairs) as Arrow batches of ``arrow_schema`` (the Spark row
    type, then ``__row_kind`` and ``__row_seq``): ``changes``: delta splits, each row of its own
    kind; else inserts."""
    import pyarrow as pa

    table = open_table(options["warehouse"], options["database"], options["table"])
    if changes:
        read = table.new_stream_read_builder().with_include_row_kind(True).new_read()
    else:
        read = table.new_read_builder().new_read()
    hidden = (ROW_KIND_COLUMN, ROW_SEQ_COLUMN)
    names = [f.name for f in arrow_schema if f.name not in hidden]
    for order, split in splits:
        row = 0
        for batch in read.to_arrow_batch_reader([split]):
            if batch.num_rows == 0:
                continue
            columns = [batch.column(batch.schema.get_field_index(n)).cast(arrow_schema.field(n).type) for n in names]
            if changes:
                kinds = [_KINDS[k] for k in batch.column(batch.schema.get_field_index(_PAIMON_KIND)).to_pylist()]
                columns.append(pa.array(kinds, pa.int8()))
            else:
                columns.append(pa.array([0] * batch.num_rows, pa.int8()))
            columns.append(pa.array(range(order + row, order + row + batch.num_rows), pa.int64()))
            row += batch.num_rows
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


__all__ = ["advance", "delta_splits", "groups", "head", "open_table", "read_splits", "snapshot_splits"]
