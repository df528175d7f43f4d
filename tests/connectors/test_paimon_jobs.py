"""Paimon jobs end to end through the real control plane (tests/e2e/harness.py): the example
(SeaTunnel's fake_cdc_sink_paimon_case1) and its multi-table sibling (case2); the source's batch
read of a snapshot (splits planned across partitions, keys merged, a query); the source in
STREAMING following new snapshots, stopped and resumed from its checkpoint reading no snapshot
twice; a primary-key table's updates and deletes streamed into another."""

from __future__ import annotations

import os
import time

import pytest

from seatide import intents
from seatide.connectors.paimon.snapshot_stream import PaimonBatchReader, source_options
from seatide.plugin.rowkind import RowKind
from seatide.store.jobs import request_stop
from tests.connectors.paimon_helpers import changes, make_sink, put, rows_of, run, table_of
from tests.e2e.harness import InProcessCluster

pytestmark = pytest.mark.spark

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fake_cdc_to_paimon.conf")
I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


def test_the_example_job_leaves_seatunnels_result_and_reads_back(local, tmp_path):
    """examples/fake_cdc_to_paimon.conf as a user runs it, then examples/paimon_to_console.conf's
    source checked by Assert: key 1 updated, key 2 deleted, key 3 once."""
    wh = tmp_path / "wh"
    with open(EXAMPLE, encoding="utf-8") as f:
        first = local.run(f.read(), variables={"warehouse": str(wh)})
    assert first.status == "FINISHED", first.error
    assert rows_of(wh, "seatunnel_namespace1.st_test") == [(1, "A_1", 100), (3, "C", 100)]
    assert table_of(wh, "seatunnel_namespace1.st_test").primary_keys == ["pk_id"]
    back = local.run(f"""
env {{ job.mode = BATCH }}
source {{ Paimon {{ warehouse = "file://{wh}", database = seatunnel_namespace1, table = st_test,
                   query = "select pk_id, name from st_test where score >= 100 and pk_id > 1" }} }}
sink {{ Assert {{ rules {{
  row_rules = [ {{ rule_type = MAX_ROW, rule_value = 1 }}, {{ rule_type = MIN_ROW, rule_value = 1 }} ]
  field_rules = [ {{ field_name = name, field_type = string,
                    field_value = [ {{ equals_to = "C" }} ] }} ]
}} }} }}""")
    assert back.status == "FINISHED", back.error


def test_multi_table_cdc_rows_land_in_each_tables_own_paimon_table(local, tmp_path):
    """fake_cdc_sink_paimon_case2's shape: two tables, ``${database_name}.${table_name}``."""
    wh = tmp_path / "wh"
    tables = []
    for db, extra, base in (("FakeDatabase1", ", score = int", 1), ("FakeDatabase2", "", 100)):
        value = ", 100" if extra else ""
        rows = ", ".join([f'{{ kind = INSERT, fields = [{base}, "A"{value}] }}',
                          f'{{ kind = INSERT, fields = [{2 * base}, "B"{value}] }}',
                          f'{{ kind = UPDATE_BEFORE, fields = [{base}, "A"{value}] }}',
                          f'{{ kind = UPDATE_AFTER, fields = [{base}, "A_{base}"{value}] }}',
                          f'{{ kind = DELETE, fields = [{2 * base}, "B"{value}] }}'])
        tables.append(f"""{{ schema = {{ table = "{db}.FakeTable1", fields {{ pk_id = bigint, name = string{extra} }},
                          primaryKey {{ name = pk_id, columnNames = [pk_id] }} }}, rows = [ {rows} ] }}""")
    result = local.run(f"""
env {{ parallelism = 1, job.mode = BATCH }}
source {{ FakeSource {{ tables_configs = [ {", ".join(tables)} ] }} }}
sink {{ Paimon {{ warehouse = "file://{wh}", database = "${{database_name}}", table = "${{table_name}}" }} }}""")
    assert result.status == "FINISHED", result.error
    assert rows_of(wh, "FakeDatabase1.FakeTable1") == [(1, "A_1", 100)]
    assert rows_of(wh, "FakeDatabase2.FakeTable1") == [(100, "A_100")]


def test_a_snapshot_is_planned_as_splits_across_partitions_and_read_merged(local, tmp_path):
    """A primary-key table of 4 buckets, its keys updated by a second commit: the batch read plans
    its splits into several Spark partitions, and reads each key once, as of the newest snapshot."""
    wh = tmp_path / "wh"
    sink = run(local.spark, make_sink(wh, **{"paimon.table.primary-keys": "id",
                                             "paimon.table.write-props": {"bucket": 4}}), tmp_path / "log")
    sink.write(changes(local.spark, [(i, f"n{i}", I) for i in range(40)], "id bigint, name string"), 0)
    sink.write(changes(local.spark, [(i, f"m{i}", UA) for i in range(0, 40, 2)] + [(39, "x", D)],
                       "id bigint, name string"), 1)
    from pyspark.sql.types import StructType

    reader = PaimonBatchReader(source_options(warehouse=str(wh), database="db", table="t", schema_json="{}",
                                              partitions=4, snapshot=2), StructType([]))
    assert len(reader.partitions()) == 4
    out = tmp_path / "out"
    result = local.run(f"""
env {{ job.mode = BATCH }}
source {{ Paimon {{ warehouse = "{wh}", database = db, table = t }} }}
sink {{ Paimon {{ warehouse = "{wh}", database = copy, table = t }} }}""")
    assert result.status == "FINISHED", result.error
    expected = sorted((i, f"m{i}" if i % 2 == 0 else f"n{i}") for i in range(39))
    assert rows_of(wh, "copy.t") == expected and not out.exists()


def append_ids(wh, ids):
    put(wh, "src.t", {"id": list(ids), "name": [f"n{i}" for i in ids]})


def test_streaming_follows_new_snapshots_and_a_resumed_job_reads_none_twice(local, tmp_path):
    """An append table streamed into another: rows committed while the job runs arrive; the job is
    stopped, more snapshots come, and the job resumed from its checkpoint reads only those."""
    wh = tmp_path / "wh"
    append_ids(wh, range(0, 3))
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 }}
source {{ Paimon {{ warehouse = "{wh}", database = src, table = t }} }}
sink {{ Paimon {{ warehouse = "{wh}", database = dst, table = t }} }}"""

    def ids():
        try:
            return [r[0] for r in rows_of(wh, "dst.t")]
        except Exception:        # noqa: BLE001 - the target is created with the first batch
            return []

    def until(count, then=None):
        def stop(store, job_id):
            deadline = time.monotonic() + 240
            while len(ids()) < count[0] and time.monotonic() < deadline:
                time.sleep(0.2)
            if then is not None:
                then()
                while len(ids()) < count[1] and time.monotonic() < deadline:
                    time.sleep(0.2)
            request_stop(store, job_id, savepoint=False, actor="test")
        return stop

    first = local.run(text, stop_after=until((3, 7), then=lambda: (append_ids(wh, range(3, 5)),
                                                                   append_ids(wh, range(5, 7)))))
    assert first.status == "CANCELED", first.error
    assert ids() == list(range(7))
    append_ids(wh, range(7, 10))
    intents.resume(local.store, first.job_id, actor="test")
    second = local.drive(first.job_id, stop_after=until((10, 10)))
    assert second.status == "CANCELED", second.error
    assert ids() == list(range(10))


def test_a_primary_key_tables_updates_and_deletes_stream_into_another(local, tmp_path):
    """The source's later snapshots carry updates and deletes (Paimon's delta files with their row
    kinds); a keyed Paimon sink applies them: the copy equals the source."""
    wh = tmp_path / "wh"
    keyed = {"paimon.table.primary-keys": "id"}
    source = run(local.spark, make_sink(wh, database="src", **keyed), tmp_path / "log")
    source.write(changes(local.spark, [(i, f"n{i}", I) for i in range(5)], "id bigint, name string"), 0)
    text = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 500 }}
source {{ Paimon {{ warehouse = "{wh}", database = src, table = t }} }}
sink {{ Paimon {{ warehouse = "{wh}", database = dst, table = t, paimon.table.primary-keys = id }} }}"""

    def copy():
        try:
            return rows_of(wh, "dst.t")
        except Exception:        # noqa: BLE001 - created with the first batch
            return []

    def change_then_stop(store, job_id):
        deadline = time.monotonic() + 240
        while len(copy()) < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        source.write(changes(local.spark, [(1, "n1", UB), (1, "u1", UA), (3, "n3", D), (9, "n9", I)],
                             "id bigint, name string"), 1)
        while copy() != rows_of(wh, "src.t") and time.monotonic() < deadline:
            time.sleep(0.2)
        request_stop(store, job_id, savepoint=False, actor="test")

    result = local.run(text, stop_after=change_then_stop)
    assert result.status == "CANCELED", result.error
    assert copy() == rows_of(wh, "src.t") == [(0, "n0"), (1, "u1"), (2, "n2"), (4, "n4"), (9, "n9")]
