"""Which Iceberg table a route writes: its catalog (where the catalog keeps its tables), its
``namespace.table`` and, in a SQL (jdbc) catalog, its catalog name. Routes alike in these are one
target (shards of one table); routes whose catalogs differ are different tables, even under one
catalog name and table name. A hadoop or REST catalog's name is only the client's label: two sinks
naming one warehouse with two labels write one table. Records of the versions whose key named the
catalog name and the table (``iceberg:<catalog_name>:<namespace.table>``), or the catalog name,
its location and the table (``iceberg:<catalog_name>@<location>:<namespace.table>``) (their
states, decided manifests and save-mode decisions) are still read as the table's."""

from __future__ import annotations

import pytest

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.keys import located_key
from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, roll_forward
from tests.connectors.iceberg_helpers import (batch_snapshots, context, make_sink, open_sink, rows_of, table_of,
                                              txn, write)
from tests.connectors.test_iceberg_upgrade import DROP, ids, old_batches, old_records, run_of

EARLIER_KEYS = {"named": lambda config: "iceberg:default:ns.t",      # before it named the catalog's location
                "located": lambda config: located_key(make_sink(config).spec())}    # with the label, before N7


@pytest.mark.spark
def test_routes_into_two_warehouses_under_one_catalog_name_are_two_tables(spark, tmp_path):
    a = {"type": "hadoop", "warehouse": f"file://{tmp_path}/whA"}
    b = {"type": "hadoop", "warehouse": f"file://{tmp_path}/whB"}      # as warehouse = ".../${database_name}" gives
    routes = [TableRoute(0, "db1.t", None, make_sink(a)), TableRoute(1, "db2.t", None, make_sink(b))]
    targets = open_sink(routes[0].sink, context(spark), routes)
    assert len(targets.keys()) == 2
    frames = {0: ids(spark, [1]), 1: ids(spark, [2])}
    write(targets, tmp_path / "log", TableFrames(frames, schema_of=lambda _i: frames[0].schema), 0)
    assert [r[0] for r in rows_of(a, columns=("id",))] == [1]
    assert [r[0] for r in rows_of(b, columns=("id",))] == [2]


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["hadoop", "rest"])
def test_one_warehouse_under_two_catalog_names_is_one_table_whose_drop_data_is_made_once(spark, tmp_path, request,
                                                                                         kind):
    """Finding N7: pipelines 1 and 2 of a job write one table through sinks that label its catalog
    ``lake`` and ``lake2``; the second's DROP_DATA (first prepared after the first committed) is
    the job's one decision, and removes nothing the first wrote."""
    config = ({"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"} if kind == "hadoop"
              else request.getfixturevalue("iceberg_rest_server").config())
    shared, _ = old_records(tmp_path)
    first = open_sink(make_sink(config, catalog_name="lake", **DROP), context(spark, plugin="sink[0]"))
    second = open_sink(make_sink(config, catalog_name="lake2", **DROP), context(spark, plugin="sink[1]"))
    run_of(first, tmp_path / "p1", shared).write(ids(spark, [1]), 0, txn(0))
    run_of(second, tmp_path / "p2", shared).write(ids(spark, [2]), 0, txn(0, "L2"))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1, 2]
    assert first.keys() == second.keys()


@pytest.mark.spark
def test_a_decision_another_sink_of_the_job_made_under_its_label_is_the_tables(spark, tmp_path):
    """A job checkpointed before N7: pipeline 1's sink (label ``lake``) decided DROP_DATA of the
    rows then in the table under its key, and died before carrying it out; another writer added a
    row since. Pipeline 2's sink (label ``lake2``), upgraded and not prepared before, finds that
    decision under the key the job's other sink gave the table (``SinkContext.job_sinks``): it
    removes what was decided, not the other writer's row."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0,
          job="before")
    before = [t.file.file_path for t in table_of(config).scan().plan_files()]
    lake, lake2 = make_sink(config, catalog_name="lake", **DROP), make_sink(config, catalog_name="lake2", **DROP)
    shared, _ = old_records(tmp_path)
    decided = located_key(lake.spec())
    shared.decide_once(SaveModeDoor(shared, "S_job").key_of(decided), {"target": decided, "destroy": {"remove": before}})
    write(open_sink(make_sink(config), context(spark, plugin="other")), tmp_path / "other", ids(spark, [900]), 0,
          job="other")

    two = open_sink(lake2, context(spark, plugin="sink[1]", job_sinks=(lake, lake2)))
    run_of(two, tmp_path / "p2", shared).write(ids(spark, [5]), 0, txn(0, "L2"))
    assert [r[0] for r in rows_of(config, columns=("id",))] == [5, 900]


@pytest.mark.spark
def test_two_catalog_names_in_one_sql_catalog_are_two_tables(spark, tmp_path):
    """In a SQL (jdbc) catalog the catalog name is part of a table's identity (the catalog_name
    column of iceberg_tables): two names, two tables, each with its own decision."""
    config = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/wh"}
    shared, _ = old_records(tmp_path)
    first = open_sink(make_sink(config, catalog_name="a", **DROP), context(spark, plugin="sink[0]"))
    second = open_sink(make_sink(config, catalog_name="b", table="u", **DROP), context(spark, plugin="sink[1]"))
    assert first.keys() != open_sink(make_sink(config, catalog_name="b", **DROP), context(spark)).keys()
    run_of(first, tmp_path / "p1", shared).write(ids(spark, [1]), 0, txn(0))
    run_of(second, tmp_path / "p2", shared).write(ids(spark, [2]), 0, txn(0, "L2"))
    assert load_catalog("a", config).table_exists("ns.t") and not load_catalog("b", config).table_exists("ns.t")


@pytest.mark.spark
@pytest.mark.parametrize("earlier", EARLIER_KEYS)
def test_a_save_mode_decision_under_the_earlier_key_is_the_tables(spark, tmp_path, earlier):
    """The earlier version decided DROP_DATA (named files) and died before its first batch: the
    resumed job carries out that decision, never a new one that would take in rows written since."""
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    write(open_sink(make_sink(config), context(spark, plugin="pre")), tmp_path / "pre", ids(spark, [100]), 0)
    before = [t.file.file_path for t in table_of(config).scan().plan_files()]
    log = SinkCommitLog(str(tmp_path / "log"))
    door = SaveModeDoor(FileDecisions(log), "S_" + txn(0).rsplit("_", 1)[0])     # write()'s scope
    key = EARLIER_KEYS[earlier](config)
    door.records.decide_once(door.key_of(key), {"target": key, "destroy": {"remove": before}})
    write(open_sink(make_sink(config), context(spark, plugin="other")), tmp_path / "other", ids(spark, [7]), 0)

    write(open_sink(make_sink(config, **DROP), context(spark)), tmp_path / "log", ids(spark, [1]), 0)
    assert [r[0] for r in rows_of(config, columns=("id",))] == [1, 7]


@pytest.mark.spark
@pytest.mark.parametrize("earlier", EARLIER_KEYS)
def test_a_job_resumes_from_states_and_a_decision_under_the_earlier_key(spark, tmp_path, earlier):
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    log = SinkCommitLog(str(tmp_path / "log"))
    key, part = old_batches(spark, config)
    spelled = EARLIER_KEYS[earlier](config)
    assert spelled != key
    log.commit(0, {"rows": 2, "total_rows": 2, "targets": {spelled: {"rows": 2, "total_rows": 2}}})
    FileDecisions(log).decide(1, txn(1), {"publish": {"targets": {spelled: part}}, "state": {
        "rows": 2, "total_rows": 4, "targets": {spelled: {"rows": 2, "total_rows": 4}}}})

    resumed = open_sink(make_sink(config, **DROP), context(spark))
    assert roll_forward(resumed, log, FileDecisions(log)) == [1]
    result = write(resumed, tmp_path / "log", ids(spark, [4, 5]), 2)
    assert [r[0] for r in rows_of(config, columns=("id",))] == list(range(6)), "a save mode was made again"
    assert batch_snapshots(config) == [txn(0), txn(1), txn(2)]
    assert result.state["targets"] == {key: {"rows": 2, "total_rows": 6}}


def test_a_catalogs_location_leaves_out_credentials_and_spelling():
    from seatide.connectors.iceberg.catalogs import catalog_location

    pg = {"type": "jdbc", "uri": "jdbc:postgresql://db:5432/cat", "jdbc.user": "u", "jdbc.password": "one"}
    assert catalog_location(pg) == catalog_location({**pg, "jdbc.password": "two", "jdbc.user": "v"})
    assert catalog_location(pg) != catalog_location({**pg, "uri": "jdbc:postgresql://db:5432/other"})
    assert catalog_location({"type": "hadoop", "warehouse": "file:///w/a/"}) == \
        catalog_location({"type": "hadoop", "warehouse": "/w/a"})
    rest = {"type": "rest", "uri": "http://cat:8181", "warehouse": "w1", "token": "t1"}
    assert catalog_location(rest) == catalog_location({**rest, "token": "t2"})
    assert catalog_location(rest) != catalog_location({**rest, "warehouse": "w2"})


def test_a_rest_catalog_respelled_on_resume_is_the_same_table():
    """Finding N6: a REST uri written another way (scheme or host case, the default port, a
    trailing slash) names the same catalog, so the same target; the key the version before
    spelled from it (its location as written) stays its earlier key."""
    import hashlib

    from seatide.connectors.iceberg.keys import table_key

    def spec(uri):
        return make_sink({"type": "rest", "uri": uri, "warehouse": "w1"}).spec()

    same = ["http://cat", "HTTP://Cat:80/", "http://cat:80", "http://cat/"]
    assert len({table_key(spec(uri)) for uri in same}) == 1
    assert table_key(spec("https://cat:443/api/")) == table_key(spec("https://CAT/api"))
    assert len({table_key(spec(uri)) for uri in ("http://cat:8181", "https://cat", "http://cat/api")} | {
        table_key(spec("http://cat"))}) == 4
    as_spelled = hashlib.sha1(b"rest:http://Cat:80|w1").hexdigest()[:12]
    assert located_key(spec("HTTP://Cat:80/")) == f"iceberg:default@{as_spelled}:ns.t"
