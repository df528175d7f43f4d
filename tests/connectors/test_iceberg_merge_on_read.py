"""Iceberg changes by key merge-on-read (equality deletes), and tables with delete files read by
SeaTide's own source, sink and compaction: on real catalogs, read back by SeaTide and pyiceberg."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.maintenance import rewrite_small_files
from seatide.connectors.iceberg.source import IcebergSourceError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import RowKind
from tests.connectors.iceberg_helpers import (batch_snapshots, changes, make_sink, opened, orphans, read_back,
                                              rows_of, table_of, txn, write)

pytestmark = pytest.mark.spark

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
DDL = "id bigint, name string"
MOR = {"iceberg.table.primary-keys": "id", "iceberg.table.upsert-mode-enabled": True,
       "iceberg.table.write-props": {"write.upsert.mode": "merge-on-read"}}


def live_files(config) -> dict[str, set[str]]:
    """The live files of each content in the table's head (its manifests read by hand)."""
    table = table_of(config)
    found: dict[str, set[str]] = {}
    for manifest in table.metadata.current_snapshot().manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            found.setdefault(entry.data_file.content.name, set()).add(entry.data_file.file_path)
    return found


def content_of(config) -> dict[str, int]:
    return {name: len(paths) for name, paths in live_files(config).items()}


def test_merge_on_read_changes_are_equality_deletes_read_back_replayed_once_and_compacted(spark, tmp_path):
    """Inserts, updates, deletes, a moved key, several changes of one key in a batch: one snapshot
    adding the upserted rows and an equality-delete file of the changed keys, no data file
    rewritten. SeaTide's source reads the expected rows; a replay adds no snapshot; the
    compaction folds the deletes in and pyiceberg's own scan then reads the table."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = opened(make_sink(config, **MOR), spark)
    write(writer, tmp_path / "log", changes(spark, [(i, f"a{i}", I) for i in range(10)]
                                            + [(i, f"b{i}", I) for i in range(100, 110)], DDL), 1)
    before = live_files(config)["DATA"]
    assert orphans(config) == [], "the first batch found the table empty: its keys are not deletes, and go"
    result = write(writer, tmp_path / "log", changes(spark, [
        (3, "a3", UB), (3, "a3-new", UA),              # update
        (4, "a4", D),                                  # delete
        (5, "a5", UB), (50, "a5-moved", UA),           # the key moves
        (6, "x", UA), (6, "y", UA), (6, "y", D), (6, "z", I),   # several changes: the last wins
        (7, "upserted", I),                            # upsert of an existing key
        (101, "b101", D),
        (200, "new", I),
    ], DDL), 2)
    assert result.state["rows"] == 8               # changed keys: 3 4 5 50 6 7 101 200
    expected = {i: f"a{i}" for i in range(10)} | {i: f"b{i}" for i in range(100, 110)}
    expected.update({3: "a3-new", 50: "a5-moved", 6: "z", 7: "upserted", 200: "new"})
    del expected[4], expected[5], expected[101]
    assert read_back(spark, config) == sorted(expected.items())

    table = table_of(config)
    head = table.metadata.current_snapshot()
    assert head.summary.operation.value == "overwrite"
    assert head.summary.additional_properties["added-equality-delete-files"] == "1"
    # nothing rewritten: batch 1's file and one new, beside batch 2's deletes (batch 1 found the
    # table empty: nothing to delete)
    assert content_of(config) == {"DATA": 2, "EQUALITY_DELETES": 1}
    assert before < live_files(config)["DATA"]
    deletes = [e.data_file for m in head.manifests(table.io) if m.content.value == 1
               and m.added_snapshot_id == head.snapshot_id for e in m.fetch_manifest_entry(table.io)]
    assert deletes[0].equality_ids == [table.metadata.schema().find_field("id").field_id]
    assert sorted(pq.read_table(deletes[0].file_path.removeprefix("file://")).column("id").to_pylist()) == \
        [3, 4, 5, 6, 7, 50, 101, 200]
    with pytest.raises(ValueError, match="equality deletes"):
        rows_of(config)                            # pyiceberg 0.12 cannot read it: why SeaTide reads it itself

    os.remove(tmp_path / "log" / "commit" / "2.json")      # the catalog committed, the runtime's log lost it
    replay = write(opened(make_sink(config, **MOR), spark), tmp_path / "log", changes(spark, [
        (4, "a4", D)], DDL), 2)
    assert replay.replayed
    assert batch_snapshots(config) == [txn(1), txn(2)]

    write(writer, tmp_path / "log", changes(spark, [(3, "a3-newer", UA), (200, "new", D)], DDL), 3)
    expected.update({3: "a3-newer"})
    del expected[200]
    assert read_back(spark, config) == sorted(expected.items())

    removed, added = rewrite_small_files(spark, load_catalog("default", config), ("ns", "t"), None, 128 * 1024 * 1024)
    assert removed == 3 + 2 and added == 1         # three data files and two delete files
    assert content_of(config) == {"DATA": 1}
    assert table_of(config).metadata.current_snapshot().summary.operation.value == "replace"
    assert rows_of(config) == sorted(expected.items())
    assert not before & live_files(config)["DATA"]


def another_engines_table(config, tmp_path):
    """A keyed table written as Flink's upsert mode writes one: parquet files with field ids,
    two appends, then one snapshot adding rows together with equality deletes of their keys
    (the new row of a key survives its own snapshot's delete), and a position delete."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from seatide.connectors.iceberg.commits import commit_files

    catalog = load_catalog("default", config)
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()),
                    identifier_field_ids=[1])
    table = catalog.create_table(("ns", "t"), schema=schema, properties={"format-version": "2"})
    arrow = schema.as_arrow()
    table.append(pa.table({"id": [1, 2, 3, 4], "name": ["a1", "a2", "a3", "a4"]}, schema=arrow))
    table.append(pa.table({"id": [5, 6], "name": ["a5", "a6"]}, schema=arrow))
    table = catalog.load_table(("ns", "t"))
    first = next(t.file.file_path for t in table.scan().plan_files() if t.file.record_count == 4)
    position_of_4 = pq.read_table(first.removeprefix("file://")).column("id").to_pylist().index(4)

    def parquet(name: str, data: pa.Table, ids: dict[str, int]) -> str:
        path = str(tmp_path / name)
        fields = [f.with_metadata({b"PARQUET:field_id": str(ids[f.name]).encode()}) for f in data.schema]
        pq.write_table(data.cast(pa.schema(fields)), path)
        return path

    def data_file(path: str, content, rows: int, equality_ids=None) -> DataFile:
        return DataFile.from_args(content=content, file_path="file://" + path, file_format=FileFormat.PARQUET,
                                  partition={}, record_count=rows, file_size_in_bytes=os.path.getsize(path),
                                  equality_ids=equality_ids, spec_id=0)

    rows = parquet("rows.parquet", pa.table({"id": [2, 7], "name": ["a2-new", "a7"]}), {"id": 1, "name": 2})
    keys = parquet("eq.parquet", pa.table({"id": pa.array([2, 3, 7], pa.int64())}), {"id": 1})
    positions = parquet("pos.parquet", pa.table({"file_path": [first], "pos": pa.array([position_of_4], pa.int64())}),
                        {"file_path": 2147483546, "pos": 2147483545})
    commit_files(table, None, {"engine": "flink-like"},
                 [data_file(rows, DataFileContent.DATA, 2), data_file(keys, DataFileContent.EQUALITY_DELETES, 3, [1]),
                  data_file(positions, DataFileContent.POSITION_DELETES, 1)], [])
    return {1: "a1", 2: "a2-new", 5: "a5", 6: "a6", 7: "a7"}     # 3 deleted by key, 4 by position


def test_a_table_with_deletes_written_by_another_engine_is_read_changed_and_refused_in_micro_batches(spark, tmp_path):
    config = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/wh"}
    expected = another_engines_table(config, tmp_path)
    assert read_back(spark, config) == sorted(expected.items())
    assert read_back(spark, config, schema={"fields": {"name": "string"}}) == sorted((v,) for v in expected.values())

    with pytest.raises(IcebergSourceError, match=r"ns\.t holds 2 delete files.*BATCH job without checkpoint.interval"):
        read_back(spark, config, micro_batch=True, stream_scan_strategy="TABLE_SCAN_THEN_INCREMENTAL")

    # SeaTide's copy-on-write change path on it (refused before): the rewritten file's rows keep their deletes
    writer = opened(make_sink(config, **{"iceberg.table.primary-keys": "id"}), spark)
    write(writer, tmp_path / "log", changes(spark, [(1, "a1-new", UA), (8, "a8", I)], DDL), 0)
    expected.update({1: "a1-new", 8: "a8"})
    assert read_back(spark, config) == sorted(expected.items())


def test_merge_on_read_needs_partition_columns_in_the_key_and_known_modes(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    with pytest.raises(OptionError, match="write.delete.mode = sideways is not one of"):
        make_sink(config, **{**MOR, "iceberg.table.write-props": {"write.delete.mode": "sideways"}})
    writer = opened(make_sink(config, **{**MOR, "iceberg.table.partition-keys": "name"}), spark)
    from seatide.connectors.iceberg.spec import IcebergSinkError

    with pytest.raises(IcebergSinkError, match="partitioned by name, which is not a primary-key column"):
        write(writer, tmp_path / "log", changes(spark, [(1, "a", I)], DDL), 0)


def test_a_decided_part_carries_its_equality_deletes_to_the_commit(spark, tmp_path):
    """The sink stages a table's batch, the runtime decides it (JSON), and the commit describes
    the files again: the equality deletes must come through as deletes, once."""
    import json

    from seatide.plugin.base import Batch
    from seatide.plugin.tables import table_frames_of
    from seatide.plugin.target_rows import RoutePart, TargetRows

    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    targets = opened(make_sink(config, **MOR), spark)
    [key] = targets.keys()
    target = targets.target(key)
    for number, rows in enumerate(([(1, "a", I), (2, "b", I)], [(1, "a", UB), (1, "a2", UA), (2, "b", D)])):
        batch = Batch(batch_id=number, transaction_id=txn(number), previous_state={"rows": 0} if number else {})
        frames = table_frames_of(changes(spark, rows, DDL))
        staged = target.stage(TargetRows((RoutePart(targets.routes[0], batch.transaction_id, frames),), frames), batch)
        decided = json.loads(json.dumps(staged.publish))
        target.publish(decided)
        target.publish(decided)                    # rolled forward again: nothing more
    assert decided["keys"] and batch_snapshots(config) == [txn(0), txn(1)]
    assert content_of(config) == {"DATA": 2, "EQUALITY_DELETES": 1}
    assert read_back(spark, config) == [(1, "a2")]


def test_deletes_apply_where_the_table_path_needs_escaping(spark, tmp_path):
    """Spark names a file by an escaped URI (a space is %20): the reader must find each file's
    sequence number under that name, or the delete would be lost (it fails loudly instead)."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/ware house"}
    writer = opened(make_sink(config, **MOR), spark)
    write(writer, tmp_path / "log", changes(spark, [(1, "a", I), (2, "b", I)], DDL), 0)
    write(writer, tmp_path / "log", changes(spark, [(1, "a", D), (2, "b2", UA)], DDL), 1)
    assert content_of(config) == {"DATA": 2, "EQUALITY_DELETES": 1}
    assert read_back(spark, config) == [(2, "b2")]
    # copy-on-write over the same table (write-props win over its properties) finds the files it rewrites
    cow = make_sink(config, **{**MOR, "iceberg.table.write-props": {"write.upsert.mode": "copy-on-write"}})
    write(opened(cow, spark), tmp_path / "log", changes(spark, [(2, "b3", UA)], DDL), 2)
    assert read_back(spark, config) == [(2, "b3")]
