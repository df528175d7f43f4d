"""Paimon sink on a real filesystem warehouse, through the one sink protocol: appends; a CDC stream's
inserts, updates and deletes as upserts and deletes of a primary-key table; partitions and
buckets; a commit made once across a crash after Paimon's commit; schema evolution. Every table is
read back by pypaimon's own reader. (Replays, zombies, shared targets and save modes: the sink
contract suite, tests/contract.)"""

from __future__ import annotations

import os

import pytest

from seatide import failpoints
from seatide.connectors.paimon.warehouse import PaimonError
from seatide.plugin.evolution import ADD, RENAME, TableChange
from seatide.plugin.options import OptionError
from tests.connectors.paimon_helpers import changes, make_sink, rows_of, run, snapshots, table_of
from seatide.plugin.rowkind import RowKind

pytestmark = pytest.mark.spark

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
PEOPLE = "id bigint, name string"


def inserts(spark, ids):
    return changes(spark, [(i, f"n{i}", I) for i in ids], PEOPLE)


def test_each_batch_is_one_commit_named_by_the_batch_and_a_replay_commits_nothing(spark, tmp_path):
    """Batches become one snapshot each, commit identifier = batch id; the runtime's log losing
    batch 1 (a crash after Paimon's commit) makes the replay find it and write nothing."""
    wh = tmp_path / "wh"
    sink = run(spark, make_sink(wh), tmp_path / "log")
    sink.write(inserts(spark, range(0, 5)), 0)
    sink.write(inserts(spark, range(5, 8)), 1)
    os.remove(tmp_path / "log" / "commit" / "1.json")
    replay = run(spark, make_sink(wh), tmp_path / "log").write(inserts(spark, range(5, 8)), 1)
    assert replay.replayed and replay.state["rows"] == 3
    assert snapshots(wh) == [("T_job_1_0_L_", 0, "APPEND"), ("T_job_1_0_L_", 1, "APPEND")]
    assert rows_of(wh) == [(i, f"n{i}") for i in range(8)]


def test_a_crash_after_paimons_commit_is_rolled_forward_without_a_second_commit(spark, tmp_path, monkeypatch):
    """The driver dies between Paimon's commit and the runtime's log (``paimon.after_commit``): the
    next start rolls the decided batch forward, finds the snapshot of its user and identifier, and
    commits nothing; the batch's rows are there once."""
    wh = tmp_path / "wh"
    monkeypatch.setitem(failpoints._POINTS, "paimon.after_commit", "raise")
    with pytest.raises(failpoints.FailpointError):
        run(spark, make_sink(wh), tmp_path / "log").write(inserts(spark, [1, 2]), 0)
    monkeypatch.delitem(failpoints._POINTS, "paimon.after_commit")
    sink = run(spark, make_sink(wh), tmp_path / "log")
    assert sink.write(inserts(spark, [1, 2]), 0).replayed
    assert rows_of(wh) == [(1, "n1"), (2, "n2")]
    assert len(snapshots(wh)) == 1


def test_cdc_rows_become_upserts_and_deletes_of_a_primary_key_table(spark, tmp_path):
    """SeaTunnel's fake_cdc_sink_paimon_case1 rows, then a second batch: an update, a delete, a key
    inserted and deleted, a key deleted and inserted again (the last change per key wins by
    ``__row_seq``, not by arrival order)."""
    wh = tmp_path / "wh"
    sink = run(spark, make_sink(wh, **{"paimon.table.primary-keys": "pk_id"}), tmp_path / "log")
    ddl = "pk_id bigint, name string, score int"
    sink.write(changes(spark, [(1, "A", 100, I), (2, "B", 100, I), (3, "C", 100, I), (3, "C", 100, I),
                               (1, "A", 100, UB), (1, "A_1", 100, UA), (2, "B", 100, D)], ddl, sequenced=True), 0)
    assert rows_of(wh) == [(1, "A_1", 100), (3, "C", 100)]
    second = changes(spark, [(3, "C", 100, UB), (3, "C2", 101, UA), (1, "A_1", 100, D), (7, "G", 1, I),
                             (7, "G", 1, D), (1, "A_2", 5, I)], ddl, sequenced=True)
    sink.write(second.orderBy("pk_id", ascending=False), 1)        # arrival order is not the source's
    assert rows_of(wh) == [(1, "A_2", 5), (3, "C2", 101)]
    assert table_of(wh).primary_keys == ["pk_id"]


def test_a_partitioned_bucketed_table_moves_a_key_between_partitions(spark, tmp_path):
    """fake_cdc_sink_paimon_case4's options: keys (pk_id, dt), partitioned by dt, two buckets; an
    update moving a row to another day deletes it from the first."""
    wh = tmp_path / "wh"
    sink = run(spark, make_sink(wh, **{"paimon.table.primary-keys": "pk_id,dt", "paimon.table.partition-keys": "dt",
                                       "paimon.table.write-props": {"bucket": 2}}), tmp_path / "log")
    ddl = "pk_id bigint, name string, dt string"
    sink.write(changes(spark, [(1, "A", "2024-03-19", I), (2, "B", "2024-03-19", I), (3, "C", "2024-03-19", I),
                               (1, "A", "2024-03-19", UB), (1, "A_1", "2024-03-20", UA),
                               (2, "B", "2024-03-19", D)], ddl, sequenced=True), 0)
    assert rows_of(wh) == [(1, "A_1", "2024-03-20"), (3, "C", "2024-03-19")]
    table = table_of(wh)
    assert table.partition_keys == ["dt"] and table.options.bucket() == 2
    assert sorted(d for d in os.listdir(wh / "db.db" / "t") if d.startswith("dt=")) == ["dt=2024-03-19",
                                                                                         "dt=2024-03-20"]


def test_deletes_into_an_append_table_are_refused_naming_the_way_out(spark, tmp_path):
    wh = tmp_path / "wh"
    sink = make_sink(wh)
    assert sink.accepted_row_kinds == {I}
    with pytest.raises(OptionError, match="partition column"):
        make_sink(wh, **{"paimon.table.primary-keys": "id", "paimon.table.partition-keys": "dt"})
    with pytest.raises(OptionError, match="local filesystem"):
        make_sink("hdfs:///tmp/wh")
    with pytest.raises(OptionError, match="hive is not supported"):
        make_sink(wh, catalog_type="hive")


def test_a_cdc_sources_added_and_renamed_columns_reach_the_table(spark, tmp_path):
    """Schema evolution as a CDC source reports it: lenient adds the column and, for a rename, a new
    column beside the old; evolve renames; rows of the new shape land in them."""
    from pyspark.sql.types import StructField, StringType

    wh = tmp_path / "wh"
    sink = run(spark, make_sink(wh, **{"paimon.table.primary-keys": "id"}), tmp_path / "log")
    sink.write(inserts(spark, [1]), 0)
    added = TableChange("db.src", ADD, "city", StructField("city", StringType()).json().__str__())
    sink.evolve([added], "lenient")
    sink.evolve([added], "lenient")          # a crash may repeat the call: applied once
    sink.write(changes(spark, [(2, "n2", "Oslo", I)], "id bigint, name string, city string"), 1)
    assert rows_of(wh) == [(1, "n1", None), (2, "n2", "Oslo")]
    renamed = TableChange("db.src", RENAME, "city", StructField("town", StringType()).json(), "town")
    sink.evolve([renamed], "evolve")
    assert [f.name for f in table_of(wh).table_schema.fields] == ["id", "name", "town"]
    with pytest.raises(PaimonError, match="have no column"):
        sink.write(changes(spark, [(3, "n3", "x", I)], "id bigint, name string, city string"), 2)
