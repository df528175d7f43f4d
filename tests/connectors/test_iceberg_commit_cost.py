"""What one Iceberg commit costs the driver, on a real hadoop catalog (no Spark needed): a
streaming sink commits a snapshot per micro-batch, so work that grows with the table's history
grows every batch."""

from __future__ import annotations

import pyarrow as pa
import pyiceberg.table

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.commits import TRANSACTION_KEY, commit_files, committed_snapshot


def test_a_commit_builds_the_table_metadata_a_few_times_not_once_per_look(tmp_path, monkeypatch):
    """pyiceberg's transaction rebuilds (and deep-copies: every snapshot the table keeps) its
    metadata on each look, and a snapshot producer looks about twenty times per commit. SeaTide's
    commit builds it once per set of staged updates; the snapshot is the same, and found by its mark."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    catalog = load_catalog("default", {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"})
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    table = catalog.create_table(("ns", "t"), schema=schema, properties={"format-version": "2"})
    for i in range(5):
        table.append(pa.table({"id": pa.array([i], pa.int64())}, schema=schema.as_arrow()))
    table = catalog.load_table(("ns", "t"))
    data = [e.data_file for m in table.metadata.current_snapshot().manifests(table.io)
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]

    built = []
    real = pyiceberg.table.update_table_metadata
    monkeypatch.setattr(pyiceberg.table, "update_table_metadata", lambda *a, **k: built.append(1) or real(*a, **k))
    committed = commit_files(table, None, {TRANSACTION_KEY: "T_job_1_0_L_1"}, [], data[:1])
    monkeypatch.undo()

    assert len(built) <= 4, f"the commit built the table's metadata {len(built)} times"
    head = catalog.load_table(("ns", "t")).metadata
    assert committed.metadata.current_snapshot().snapshot_id == head.current_snapshot().snapshot_id
    assert committed_snapshot(head, None, "T_job_1_0_L_1") == head.current_snapshot()
    assert head.current_snapshot().summary["deleted-data-files"] == "1"
