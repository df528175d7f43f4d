"""The Iceberg sink against other writers of its table and against its own zombie: each race is
held at its exact step by a failpoint while the other side runs for real on the same catalog."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seatide.plugin.rowkind import RowKind
from tests.connectors.iceberg_helpers import (Held, batch_snapshots, changes, make_sink, opened, orphans, read_back,
                                              rows_of, routed_writer, table_of, txn, write, write_routed)

pytestmark = pytest.mark.spark

I, UA = RowKind.INSERT, RowKind.UPDATE_AFTER
DDL = "id bigint, name string"
KEYED = {"iceberg.table.primary-keys": "id", "iceberg.table.upsert-mode-enabled": True}
MOR = {**KEYED, "iceberg.table.write-props": {"write.upsert.mode": "merge-on-read"}}
SHARDS = ["shop.orders_0", "shop.orders_1"]


def in_thread(step) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["result"] = step()
        except BaseException as exc:     # the test looks at what the held side ended with
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def another_engine_deletes(config, tmp_path, ids) -> None:
    """An engine that is not SeaTide deletes keys by an equality-delete file (as Flink's upsert
    mode does): the data files holding them stay, and the delete applies to older rows."""
    from seatide.connectors.iceberg.commits import commit_files
    from seatide.connectors.iceberg.datafiles import describe

    table = table_of(config)
    path = str(tmp_path / "other-engine-delete.parquet")
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    field = table.metadata.schema().find_field("id").field_id
    commit_files(table, None, {"engine": "other"}, describe(table.metadata, [path], equality_ids=[field]), [])


def another_engine_appends(config, rows: list[tuple]) -> None:
    table = table_of(config)
    table.append(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "name": [r[1] for r in rows]},
                          schema=table.schema().as_arrow()))


def test_a_decided_copy_on_write_batch_is_staged_again_when_another_writer_deleted_a_row_it_rewrites(
        spark, tmp_path, monkeypatch):
    """Batch 1 updates key 3, so the file holding keys 0-9 is rewritten; the batch is decided and
    held before its commit. Another engine deletes key 9 (an equality delete: the file stays). The
    rewrite read key 9 before that delete, and its new file would carry it past the delete: the
    commit must stage the rewrite again on the new head, and key 9 stays deleted."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = routed_writer(spark, config, SHARDS, **KEYED)
    write_routed(writer, tmp_path / "log", {0: changes(spark, [(i, f"a{i}", I) for i in range(10)], DDL)}, 0)
    held = Held(monkeypatch, "sink.after_decision", tmp_path / "go")
    thread, out = in_thread(lambda: write_routed(
        writer, tmp_path / "log", {1: changes(spark, [(3, "a3-new", UA)], DDL)}, 1))
    try:
        held.reached()
        another_engine_deletes(config, tmp_path, [9])
    finally:
        held.release()
        thread.join(timeout=300)
    assert "error" not in out, out
    expected = {i: f"a{i}" for i in range(9)} | {3: "a3-new"}
    assert read_back(spark, config) == sorted(expected.items())
    assert orphans(config) == [], "the rewrite staged for the old head and the batch's keys are removed"


def test_a_decided_merge_on_read_batch_into_an_empty_table_deletes_the_keys_another_writer_added(
        spark, tmp_path, monkeypatch):
    """The first batch of a merge-on-read sync finds the table empty, so it needs no equality
    deletes; it is decided and held before its commit. Another engine appends key 2 meanwhile.
    Committed as staged, key 2 would be in the table twice: the commit must delete the batch's keys
    once the table holds rows."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    writer = routed_writer(spark, config, SHARDS, **MOR)
    held = Held(monkeypatch, "sink.after_decision", tmp_path / "go")
    thread, out = in_thread(lambda: write_routed(
        writer, tmp_path / "log", {0: changes(spark, [(i, f"a{i}", I) for i in range(5)], DDL)}, 0))
    try:
        held.reached()
        another_engine_appends(config, [(2, "other")])
    finally:
        held.release()
        thread.join(timeout=300)
    assert "error" not in out, out
    assert read_back(spark, config) == [(i, f"a{i}") for i in range(5)]
    assert orphans(config) == []


def test_a_zombie_held_before_recreate_schema_never_drops_its_replacements_table(spark, tmp_path, monkeypatch):
    """RECREATE_SCHEMA, decided once: a zombie checks that the table is the one the decision names
    and is held right before it replaces it. Its replacement recreates the table and commits two
    batches. The zombie wakes: the table it would remove is its replacement's, with their batches."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/warehouse"}
    write(opened(make_sink(config), spark), tmp_path / "before", changes(spark, [(1, "old", I)], DDL), 0,
          lineage="A", job="before")
    replaced = threading.Event()

    def zombie_fence():
        if replaced.is_set():
            raise RuntimeError("attempt fenced: the job has a newer attempt")

    recreate = {"schema_save_mode": "RECREATE_SCHEMA"}
    ddl = "id bigint, score double"
    held = Held(monkeypatch, "iceberg.before_recreate", tmp_path / "go")
    zombie = opened(make_sink(config, **recreate), spark)
    thread, out = in_thread(lambda: write(zombie, tmp_path / "log", changes(spark, [(10, 1.0, I)], ddl), 0,
                                          lineage="B", fence=zombie_fence, attempt="1"))
    try:
        held.reached()
        replaced.set()
        replacement = opened(make_sink(config, **recreate), spark)
        write(replacement, tmp_path / "log", changes(spark, [(10, 1.0, I)], ddl), 0, lineage="B", attempt="2")
        write(replacement, tmp_path / "log", changes(spark, [(11, 2.0, I)], ddl), 1, lineage="B", attempt="2")
    finally:
        held.release()
        thread.join(timeout=300)
    assert rows_of(config) == [(10, 1.0), (11, 2.0)], out
    assert batch_snapshots(config)[-2:] == [txn(0, "B"), txn(1, "B")]


@pytest.mark.parametrize("first", ["commits", "prepares"])
def test_a_second_pipeline_that_found_no_decision_never_refuses_the_jobs_table(spark, tmp_path, monkeypatch, first):
    """Finding N4 (Jdbc's F6): pipelines 1 and 2 of a job write one table under
    ERROR_WHEN_DATA_EXISTS. Pipeline 2 finds no decision of the job's and is held before its plan;
    pipeline 1 decides on the missing table and ``commits`` a row, or ``prepares`` it on an empty
    first batch and another writer appends a row; pipeline 2 goes on. The check was made once for
    the job, before any row: pipeline 2 refuses nothing, and its row lands beside the others."""
    from tests.connectors.test_iceberg_upgrade import ids, old_records, run_of

    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    shared, _ = old_records(tmp_path)
    mode = {"data_save_mode": "ERROR_WHEN_DATA_EXISTS"}
    one = run_of(opened(make_sink(config, **mode), spark), tmp_path / "p1", shared)
    two = run_of(opened(make_sink(config, **mode), spark, plugin="sink[1]"), tmp_path / "p2", shared)
    held = Held(monkeypatch, "sink.save_mode_plan", tmp_path / "go")
    thread, out = in_thread(lambda: two.write(ids(spark, [2]), 0, txn(0, "L2")))
    held.reached()
    one.write(ids(spark, [1] if first == "commits" else []), 0, txn(0))
    if first == "prepares":
        another_engine_appends(config, [(900, "other")])
    held.release()
    thread.join(timeout=300)
    assert "error" not in out, out.get("error")
    assert [r[0] for r in rows_of(config, columns=("id",))] == ([1, 2] if first == "commits" else [2, 900])
