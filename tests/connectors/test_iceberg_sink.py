"""Iceberg sink on real catalogs (a warehouse directory, SQLite, PostgreSQL): one snapshot per micro-batch,
found again by its transaction id; changes by key copy-on-write; save modes; branches; maintenance.
Every table is read back by pyiceberg's own scan."""

from __future__ import annotations

import os
import threading

import pytest

from seatide import failpoints
from seatide.config.job import ConfigError
from seatide.config.loader import load_job_text
from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.spec import IcebergSinkError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import RowKind
from tests.connectors.iceberg_helpers import (batch_snapshots, catalog_config, changes, make_sink, opened, orphans,
                                              rows_of, table_of, txn, write)

pytestmark = pytest.mark.spark
__all__ = ["catalog_config"]

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


def inserts(spark, ids, name="n"):
    return changes(spark, [(i, f"{name}{i}", I) for i in ids], "id bigint, name string")


def test_each_batch_is_one_snapshot_and_a_replay_commits_nothing(spark, catalog_config, tmp_path):
    """Batch 1 is committed in Iceberg but the runtime's log lost it (a crash right after the
    catalog commit): the replay finds the snapshot by its transaction id and writes nothing."""
    writer = opened(make_sink(catalog_config), spark)
    write(writer, tmp_path / "log", inserts(spark, range(0, 5)), 0)
    write(writer, tmp_path / "log", inserts(spark, range(5, 8)), 1)
    os.remove(tmp_path / "log" / "commit" / "1.json")
    replay = write(opened(make_sink(catalog_config), spark), tmp_path / "log", inserts(spark, range(5, 8)), 1)
    assert replay.replayed and replay.state["rows"] == 3
    assert batch_snapshots(catalog_config) == [txn(0), txn(1)]
    assert rows_of(catalog_config) == [(i, f"n{i}") for i in range(8)]
    if catalog_config["type"] == "hadoop":     # the replay staged nothing: one directory per committed batch
        assert len(os.listdir(os.path.join(str(tmp_path), "warehouse", "ns", "t", "data"))) == 2


def test_jdbc_catalog_keeps_icebergs_own_tables(spark, tmp_path):
    """Iceberg's JdbcCatalog tables (iceberg_tables with catalog_name), so other engines find the table."""
    import sqlite3

    config = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/wh"}
    sink = make_sink(config, catalog_name="lake")
    write(opened(sink, spark), tmp_path / "log", inserts(spark, [1]), 0)
    with sqlite3.connect(f"{tmp_path}/catalog.db") as conn:
        rows = conn.execute("SELECT catalog_name, table_namespace, table_name, metadata_location "
                            "FROM iceberg_tables").fetchall()
    assert [r[:3] for r in rows] == [("lake", "ns", "t")] and rows[0][3].endswith(".metadata.json")


@pytest.mark.parametrize("kind", ["hadoop", "rest"])
def test_a_racing_attempt_of_the_same_batch_loses_and_commits_nothing(spark, tmp_path, monkeypatch, request, kind):
    """Two attempts of batch 0 (a zombie and its replacement): the first is held after its check,
    the second commits; the first's commit then fails on the moved head (a REST catalog answers
    409 to its assert-ref-snapshot-id), it looks again, finds the batch and writes nothing more.
    One snapshot, every row once."""
    config = ({"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"} if kind == "hadoop"
              else request.getfixturevalue("iceberg_rest_server").config())
    gate = str(tmp_path / "gate")
    monkeypatch.setitem(failpoints._POINTS, "iceberg.before_commit", f"gate:0:{gate}")
    monkeypatch.setitem(failpoints._HITS, "iceberg.before_commit", 0)
    zombie = opened(make_sink(config), spark)
    results = {}
    thread = threading.Thread(target=lambda: results.setdefault(
        "zombie", write(zombie, tmp_path / "zombie-log", inserts(spark, range(4)), 0, attempt="1")))
    thread.start()
    try:
        failpoints_wait(lambda: failpoints._HITS["iceberg.before_commit"] >= 1)
        monkeypatch.delitem(failpoints._POINTS, "iceberg.before_commit")
        replacement = write(opened(make_sink(config), spark), tmp_path / "log", inserts(spark, range(4)), 0,
                            attempt="2")
    finally:
        open(gate, "w").close()
        thread.join(timeout=300)
    assert replacement.state["rows"] == 4 and results["zombie"].state["rows"] == 4
    assert batch_snapshots(config) == [txn(0)]
    assert rows_of(config) == [(i, f"n{i}") for i in range(4)]


def failpoints_wait(condition, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_fenced_writer_commits_nothing_and_the_retry_commits_once(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}

    def fenced():
        raise RuntimeError("attempt fenced")

    with pytest.raises(RuntimeError, match="fenced"):
        write(opened(make_sink(config), spark), tmp_path / "log", inserts(spark, [1, 2]), 0, fence=fenced)
    assert table_of(config).metadata.current_snapshot() is None
    write(opened(make_sink(config), spark), tmp_path / "log", inserts(spark, [1, 2]), 0)
    assert batch_snapshots(config) == [txn(0)] and rows_of(config) == [(1, "n1"), (2, "n2")]


def test_changes_apply_by_key_copy_on_write_rewriting_only_the_files_they_touch(spark, tmp_path):
    """Inserts, updates (also one that moves a key), deletes, several changes to one key in a batch:
    the last change per key wins; files without a changed key are kept as they are."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = opened(make_sink(config, **{"iceberg.table.primary-keys": "id",
                                  "iceberg.table.upsert-mode-enabled": True}), spark)
    ddl = "id bigint, name string"
    write(writer, tmp_path / "log", changes(spark, [(i, f"a{i}", I) for i in range(0, 10)], ddl), 0)
    write(writer, tmp_path / "log", changes(spark, [(i, f"b{i}", I) for i in range(100, 110)], ddl), 1)
    before = {t.file.file_path for t in table_of(config).scan().plan_files()}
    result = write(writer, tmp_path / "log", changes(spark, [
        (3, "a3", UB), (3, "a3-new", UA),              # update
        (4, "a4", D),                                  # delete
        (5, "a5", UB), (50, "a5-moved", UA),           # the key moves
        (6, "x", UA), (6, "y", UA), (6, "y", D), (6, "z", I),   # several changes: the last wins
        (7, "upserted", I),                            # upsert of an existing key
        (200, "new", I),
    ], ddl), 2)
    assert result.state["rows"] == 7               # changed keys: 3 4 5 50 6 7 200
    expected = {i: f"a{i}" for i in range(10)} | {i: f"b{i}" for i in range(100, 110)}
    expected.update({3: "a3-new", 50: "a5-moved", 6: "z", 7: "upserted", 200: "new"})
    del expected[4], expected[5]
    assert rows_of(config) == sorted(expected.items())
    table = table_of(config)
    after = {t.file.file_path for t in table.scan().plan_files()}
    assert not any("delete" in str(t.delete_files) for t in table.scan().plan_files())
    assert len(before - after) == 1, "only the file holding keys 0-9 is rewritten; keys 100-109 stay put"
    assert table.metadata.current_snapshot().summary.operation.value == "overwrite"
    assert orphans(config) == [], "the batch's keys, staged for a later head's rewrite, are removed"


def test_partitioned_table_with_evolving_schema_and_case_insensitive_fields(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    options = {"iceberg.table.partition-keys": "region", "iceberg.table.schema-evolution-enabled": True,
               "iceberg.table.write-props": {"write.parquet.compression-codec": "snappy"}}
    writer = opened(make_sink(config, **options), spark)
    write(writer, tmp_path / "log", changes(spark, [(1, "eu", I), (2, "us", I), (3, "eu", I)],
                                            "id bigint, region string"), 0)
    # a new field, and the known ones spelled in capitals (case_sensitive = false by default)
    write(writer, tmp_path / "log", changes(spark, [(4, "us", 9.5, I)], "ID bigint, REGION string, score double"), 1)
    table = table_of(config)
    assert [f.name for f in table.schema().fields] == ["id", "region", "score"]
    assert rows_of(config) == [(1, "eu", None), (2, "us", None), (3, "eu", None), (4, "us", 9.5)]
    partitions = sorted({t.file.partition[0] for t in table.scan().plan_files()})
    assert partitions == ["eu", "us"]
    assert rows_of(config, row_filter="region = 'eu'") == [(1, "eu", None), (3, "eu", None)]
    assert table.properties["write.parquet.compression-codec"] == "snappy"

    strict = opened(make_sink(config, table="t"), spark)       # no evolution: a new field is refused
    with pytest.raises(IcebergSinkError, match="fields the table lacks: other"):
        write(strict, tmp_path / "log2", changes(spark, [(5, "x", I)], "id bigint, other string"), 0, lineage="L2")


def test_save_modes_before_the_first_batch(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    write(opened(make_sink(config), spark), tmp_path / "a", inserts(spark, [1, 2]), 0, lineage="A", job="before")
    with pytest.raises(IcebergSinkError, match="ERROR_WHEN_DATA_EXISTS and table ns.t holds 2 rows"):
        write(opened(make_sink(config, data_save_mode="ERROR_WHEN_DATA_EXISTS"), spark),
              tmp_path / "b", inserts(spark, [3]), 0, lineage="B")
    write(opened(make_sink(config, data_save_mode="DROP_DATA"), spark), tmp_path / "c",
          inserts(spark, [3]), 0, lineage="C")
    assert rows_of(config) == [(3, "n3")]
    before = table_of(config).metadata
    write(opened(make_sink(config, schema_save_mode="RECREATE_SCHEMA"), spark, job="D"), tmp_path / "d",
          changes(spark, [(4, 1.5, I)], "id bigint, x double"), 0, lineage="D", job="D")     # another run
    after = table_of(config).metadata       # replaced in place, as Iceberg's REPLACE TABLE: history kept
    assert after.table_uuid == before.table_uuid and rows_of(config) == [(4, 1.5)]
    assert [f.name for f in after.schema().fields] == ["id", "x"]
    assert min(f.field_id for f in after.schema().fields) > before.last_column_id
    assert {s.snapshot_id for s in before.snapshots} < {s.snapshot_id for s in after.snapshots}
    with pytest.raises(IcebergSinkError, match="does not exist"):
        write(opened(make_sink(config, table="missing", schema_save_mode="ERROR_WHEN_SCHEMA_NOT_EXIST"), spark),
              tmp_path / "e", inserts(spark, [1]), 0, lineage="E")


def test_commit_branch_leaves_main_alone(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    write(opened(make_sink(config), spark), tmp_path / "a", inserts(spark, [1]), 0, lineage="A")
    branch = opened(make_sink(config, **{"iceberg.table.commit-branch": "audit"}), spark)
    write(branch, tmp_path / "b", inserts(spark, [2]), 0, lineage="B")
    write(branch, tmp_path / "b", inserts(spark, [3]), 1, lineage="B")
    table = table_of(config)
    audit = table.metadata.snapshot_by_name("audit")
    assert rows_of(config) == [(1, "n1")]
    assert rows_of(config, snapshot_id=audit.snapshot_id) == [(1, "n1"), (2, "n2"), (3, "n3")]


@pytest.mark.parametrize("kind", ["hadoop", "rest"])
def test_commits_to_a_branch_of_a_new_table_make_the_branch_and_leave_main_empty(spark, tmp_path, request, kind):
    """SeaTunnel's fake_to_iceberg_with_branch: a new table, nobody else writing. As in Iceberg, the
    first commit to a missing branch creates it (main has no snapshot to start it at); main stays
    empty, the branch holds every batch once, and a replay of the last batch commits nothing."""
    config = ({"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"} if kind == "hadoop"
              else request.getfixturevalue("iceberg_rest_server").config())
    sink = {"iceberg.table.commit-branch": "commit-branch"}
    writer = opened(make_sink(config, **sink), spark)
    write(writer, tmp_path / "log", inserts(spark, [1, 2]), 0)
    write(writer, tmp_path / "log", inserts(spark, [3]), 1)
    os.remove(tmp_path / "log" / "commit" / "1.json")
    assert write(opened(make_sink(config, **sink), spark), tmp_path / "log", inserts(spark, [3]), 1).replayed
    table = table_of(config)
    assert table.metadata.current_snapshot() is None and rows_of(config) == []
    branch = table.metadata.snapshot_by_name("commit-branch")
    assert rows_of(config, snapshot_id=branch.snapshot_id) == [(1, "n1"), (2, "n2"), (3, "n3")]
    assert batch_snapshots(config) == [txn(0), txn(1)]


def test_maintenance_expires_snapshots_and_compacts_small_files(spark, tmp_path):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = opened(make_sink(config, **{"iceberg.maintenance.expire-snapshots-older-than-ms": 0,
                                  "iceberg.maintenance.retain-last": 2,
                                  "iceberg.maintenance.rewrite-every-commits": 3,
                                  "iceberg.table.write-props": {"write.metadata.previous-versions-max": "2"}}
                       ), spark)
    for batch in range(6):
        write(writer, tmp_path / "log", inserts(spark, [batch * 10, batch * 10 + 1]).coalesce(1), batch)
    table = table_of(config)
    assert len(table.metadata.snapshots) <= 3          # the newest 2 (+ the head) are kept
    assert rows_of(config, columns=("id",)) == [(b * 10 + k,) for b in range(6) for k in (0, 1)]
    files = [t.file.file_path for t in table.scan().plan_files()]
    assert len(files) < 6, files                       # compacted: six one-file batches are fewer files now
    on_disk = [os.path.join(d, f) for d, _, fs in os.walk(f"{tmp_path}/warehouse/ns/t/data") for f in fs
               if f.endswith(".parquet")]
    live = {t.file.file_path for s in table.metadata.snapshots for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}
    assert sorted("file://" + p for p in on_disk) == sorted(live), "files only expired snapshots held are deleted"
    versions = [n for n in os.listdir(f"{tmp_path}/warehouse/ns/t/metadata") if n.endswith(".metadata.json")]
    assert len(versions) <= 4, versions                # the current one and the log's previous 2 (+ a hint race)
    # the replay mark survives expiry: the head carries the last batch
    assert write(writer, tmp_path / "log", inserts(spark, [99]), 5).replayed


def test_hadoop_catalog_commit_is_an_atomic_swap(tmp_path):
    """Two commits on the same version: the second fails (never replaces the first's metadata)."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    catalog = load_catalog("c", {"type": "hadoop", "warehouse": str(tmp_path)})
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", pa.schema([("id", pa.int64())]))
    first, second = catalog.load_table("ns.t"), catalog.load_table("ns.t")
    first.append(pa.table({"id": [1]}))
    props = {**second.metadata.properties, "commit.retry.num-retries": "0"}
    second.metadata = second.metadata.model_copy(update={"properties": props})
    with pytest.raises(CommitFailedException):
        second.append(pa.table({"id": [2]}))
    assert catalog.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [1]
    with open(tmp_path / "ns" / "t" / "metadata" / "version-hint.text") as handle:
        assert handle.read() == "2"
    # a stale hint (a crash between the commit and the hint) is read past
    with open(tmp_path / "ns" / "t" / "metadata" / "version-hint.text", "w") as handle:
        handle.write("1")
    assert catalog.load_table("ns.t").metadata_location.endswith("v2.metadata.json")


def test_hadoop_catalog_commit_fails_when_another_writer_commits_after_the_check(tmp_path, monkeypatch):
    """A writer commits between this commit's requirements check and its publish: the publish
    must fail (the version after the one checked exists), never land one version later on top of
    the other's, which would drop the other writer's snapshot though it was told it committed."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException
    from seatide.connectors.iceberg.hadoop_catalog import HadoopCatalog

    catalog = load_catalog("c", {"type": "hadoop", "warehouse": str(tmp_path)})
    other = load_catalog("c2", {"type": "hadoop", "warehouse": str(tmp_path)})
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", pa.schema([("id", pa.int64())]))
    checked = HadoopCatalog._update_and_stage_table

    def other_commits_after_the_check(self, *args):
        staged = checked(self, *args)
        if self is catalog:
            monkeypatch.setattr(HadoopCatalog, "_update_and_stage_table", checked)
            other.load_table("ns.t").append(pa.table({"id": [100]}))
        return staged

    monkeypatch.setattr(HadoopCatalog, "_update_and_stage_table", other_commits_after_the_check)
    mine = catalog.load_table("ns.t")
    mine.metadata = mine.metadata.model_copy(
        update={"properties": {**mine.metadata.properties, "commit.retry.num-retries": "0"}})
    with pytest.raises(CommitFailedException):
        mine.append(pa.table({"id": [1]}))
    assert catalog.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [100]


def test_bad_options_name_the_option(tmp_path):
    def job(block: str) -> str:
        return f"""
env {{ job.mode = BATCH }}
source {{ FakeSource {{ row.num = 1, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Iceberg {{ table = t, {block} }} }}
"""
    cases = [
        ('iceberg.catalog.config = { type = hive, uri = "thrift://x:9083" }', "type = \"hive\" is not supported"),
        ('iceberg.catalog.config = { type = hadoop }', "needs warehouse"),
        ('iceberg.catalog.config = { type = hadoop, warehouse = "s3://bucket/wh" }', "not on the local filesystem"),
        ('iceberg.catalog.config = { type = jdbc, uri = "jdbc:oracle:thin:@x" }', "PostgreSQL"),
        (f'iceberg.catalog.config = {{ type = hadoop, warehouse = "{tmp_path}" }}, '
         'iceberg.table.upsert-mode-enabled = true', "needs iceberg.table.primary-keys"),
        (f'iceberg.catalog.config = {{ type = hadoop, warehouse = "{tmp_path}" }}, '
         'iceberg.table.write-props = { write.format.default = orc }', "writes parquet"),
    ]
    for block, message in cases:
        with pytest.raises((ConfigError, OptionError)) as info:
            load_job_text(job(block))
        assert message in str(info.value), (block, str(info.value))


def test_maintenance_command_expires_snapshots_by_hand(tmp_path, capsys):
    """``python -m seatide.connectors.iceberg.maintenance ... expire``, on a table other writers made."""
    import json

    import pyarrow as pa

    from seatide.connectors.iceberg import maintenance

    config = {"type": "hadoop", "warehouse": str(tmp_path)}
    catalog = load_catalog("default", config)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", pa.schema([("id", pa.int64())]))
    for i in range(5):
        table.append(pa.table({"id": [i]}))
    args = ["--catalog", json.dumps(config), "--table", "ns.t"]
    assert maintenance.main([*args, "expire", "--older-than-ms", "0", "--retain-last", "2"]) == 0
    assert "expired 3 snapshots" in capsys.readouterr().out
    table = catalog.load_table("ns.t")
    assert len(table.metadata.snapshots) == 2 and table.scan().to_arrow().num_rows == 5
    assert maintenance.main(["--catalog", "{not json", "--table", "ns.t", "expire", "--older-than-ms", "0"]) == 2
