"""Which Iceberg table a route writes: its catalog (where the catalog keeps its tables), its
``namespace.table`` and, in a SQL (jdbc) catalog, its catalog name. Routes alike in these are one
target (shards of one table); routes whose catalogs differ are different tables, even under one
catalog name and table name. A hadoop or REST catalog's name is only the client's label: two sinks
naming one warehouse with two labels write one table. Records of the versions whose key named the
catalog name and the table (``iceberg:<catalog_name>:<namespace.table>``), or the catalog name,
its location and the table (``iceberg:<catalog_name>@<location>:<namespace.table>``) (their
states, decided manifests and save-mode decisions) are still read as the table's."""

from __future__ import annotations

import hashlib

import pytest

from seatide.connectors.iceberg.catalogs import load_catalog
from seatide.connectors.iceberg.keys import hashed_key, landed_key, located_key, table_key
from seatide.connectors.iceberg.targets import IcebergTargets
from seatide.plugin.sink_protocol import SaveModeDoor
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, roll_forward
from tests.held import Held
from tests.connectors.iceberg_helpers import (batch_snapshots, context, make_sink, open_sink, opened, rows_of, table_of,
                                              txn, write)
from tests.connectors.test_iceberg_concurrency import in_thread
from tests.connectors.test_iceberg_upgrade import DROP, ids, old_batches, old_records, run_of

EARLIER_KEYS = {"named": lambda config: "iceberg:default:ns.t",      # before it named the catalog's location
                "located": lambda config: located_key(make_sink(config).spec()),    # with the label, before N7
                "landed": lambda config: landed_key(make_sink(config).spec()),     # the path as written, before N8
                "hashed": lambda config: hashed_key(make_sink(config).spec())}     # hashed, before review 8b


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
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}//wh"}     # as written before N8
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
    config = {"type": "hadoop", "warehouse": f"file://{tmp_path}//wh"}     # as written before N8
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
    def spec(uri):
        return make_sink({"type": "rest", "uri": uri, "warehouse": "w1"}).spec()

    same = ["http://cat", "HTTP://Cat:80/", "http://cat:80", "http://cat/"]
    assert len({table_key(spec(uri)) for uri in same}) == 1
    assert table_key(spec("https://cat:443/api/")) == table_key(spec("https://CAT/api"))
    assert len({table_key(spec(uri)) for uri in ("http://cat:8181", "https://cat", "http://cat/api")} | {
        table_key(spec("http://cat"))}) == 4
    as_spelled = hashlib.sha1(b"rest:http://Cat:80|w1").hexdigest()[:12]
    assert located_key(spec("HTTP://Cat:80/")) == f"iceberg:default@{as_spelled}:ns.t"


# -- review N8: every catalog's location resolved, not only a REST uri's ----------------------------
RECREATE = {"schema_save_mode": "RECREATE_SCHEMA"}


def _pg_database(request) -> str:
    """A fresh PostgreSQL database for one SQL catalog, dropped after the test."""
    import secrets

    from sqlalchemy import create_engine, text

    from tests.connectors.iceberg_helpers import PG_ADMIN

    name = f"iceberg_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))

    def drop():
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()

    request.addfinalizer(drop)
    return name


def _two_spellings(spelling: str, tmp_path, request) -> tuple[dict, dict]:
    """One catalog (so one table ns.t) written two ways."""
    wh = f"file://{tmp_path}/warehouse"
    if spelling.startswith("hadoop"):
        a = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
        (tmp_path / "x").mkdir()
        other = {"hadoop-doubled-slash": f"file://{tmp_path}//wh",
                 "hadoop-dotdot-plain-path": f"{tmp_path}/x/../wh/"}[spelling]
        return a, {**a, "warehouse": other}
    if spelling == "sqlite-doubled-slash":
        a = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/catalog.db", "warehouse": wh}
        return a, {**a, "uri": f"jdbc:sqlite:{tmp_path}//catalog.db"}
    name = _pg_database(request)
    a = {"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:5432/{name}", "jdbc.user": "postgres", "warehouse": wh}
    if spelling == "postgresql-default-port":
        return a, {**a, "uri": f"jdbc:postgresql://127.0.0.1/{name}"}
    return a, {"type": "sql", "uri": f"postgresql+psycopg://postgres@127.0.0.1/{name}", "warehouse": wh}


def _recreate_while_the_other_commits(spark, tmp_path, monkeypatch, a: dict, b: dict, b_key=None):
    """Pipeline 1 (table spelled ``a``) prepares RECREATE_SCHEMA on an empty first batch; pipeline 2
    (spelled ``b``; keyed by ``b_key`` of its spec where given) is held after its save modes are
    decided while pipeline 1 commits row 1, then writes row 2. The table's rows after (the one
    recreate of the job keeps both)."""
    write(opened(make_sink(a), spark, plugin="pre"), tmp_path / "pre", ids(spark, [100]), 0, job="before")
    shared, _ = old_records(tmp_path)
    one = run_of(opened(make_sink(a, **RECREATE), spark), tmp_path / "p1", shared)
    with monkeypatch.context() as keyed:
        if b_key is not None:
            keyed.setattr(IcebergTargets, "target_key", lambda self, route: b_key(route.sink.spec()))
        two = run_of(opened(make_sink(b, **RECREATE), spark, plugin="sink[1]"), tmp_path / "p2", shared)
    one.write(ids(spark, []), 0, txn(0))
    held = Held(monkeypatch, "sink.save_modes_decided", tmp_path / "go")
    thread, out = in_thread(lambda: two.write(ids(spark, [2]), 0, txn(0, "L2")))
    held.reached()                       # pipeline 2's plan is decided, not yet carried out
    one.write(ids(spark, [1]), 1, txn(1))
    held.release()
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in out, out.get("error")
    return one, two, sorted(r[0] for r in rows_of(a, columns=("id",)))


@pytest.mark.spark
@pytest.mark.parametrize("spelling", ["hadoop-doubled-slash", "hadoop-dotdot-plain-path", "sqlite-doubled-slash",
                                      "postgresql-default-port", "postgresql-sqlalchemy-url"])
def test_one_table_spelled_two_ways_is_one_target_recreated_once(spark, tmp_path, monkeypatch, request, spelling):
    """Finding N8: a hadoop warehouse path or a SQL catalog's address written another way is the
    same catalog, so the same target, whose RECREATE_SCHEMA is the job's one decision: pipeline 2
    takes pipeline 1's and never recreates the table over the row pipeline 1 committed."""
    a, b = _two_spellings(spelling, tmp_path, request)
    one, two, rows = _recreate_while_the_other_commits(spark, tmp_path, monkeypatch, a, b)
    assert one.targets.keys() == two.targets.keys()
    assert rows == [1, 2]


@pytest.mark.spark
def test_a_recreate_is_not_carried_out_over_a_row_the_run_committed(spark, tmp_path, monkeypatch):
    """Second line of defence: a key no normalisation unifies with the other's (a symlinked warehouse
    was one until review 8b; here pipeline 2 keys the table as the version before did, by a hash of
    the catalog's location) is two keys, so two decisions; pipeline 2's recreate, decided before
    pipeline 1's row, finds a snapshot of the job run in the table right before the replace and
    leaves it."""
    (tmp_path / "wh").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "wh")
    a = {"type": "hadoop", "warehouse": f"file://{tmp_path}/wh"}
    one, two, rows = _recreate_while_the_other_commits(spark, tmp_path, monkeypatch, a,
                                                       {**a, "warehouse": f"{tmp_path}/link"}, hashed_key)
    assert one.targets.keys() != two.targets.keys()
    assert rows == [1, 2]


def test_a_warehouse_path_and_a_sql_address_are_one_location_however_spelled():
    """Finding N8: a path's ``//``, ``.``, ``..``, a ``file:`` URI or a plain path; a SQL address's
    jdbc: or SQLAlchemy form (any driver), host case, default port (PostgreSQL 5432, MySQL and
    MariaDB 3306), a SQLite file's path. The key the version before gave it stays an earlier key."""
    from seatide.connectors.iceberg.catalogs import catalog_location

    def where(kind, **config):
        return catalog_location({"type": kind, **config})

    assert len({where("hadoop", warehouse=w) for w in ("file:///w/wh", "file:///w//wh", "/w/a/../wh", "/w/./wh/",
                                                       "file:/w/wh", "//w/wh")}) == 1
    assert where("hadoop", warehouse="/w/wh") != where("hadoop", warehouse="/w/wh2")
    pg = ["jdbc:postgresql://127.0.0.1:5432/db", "jdbc:postgresql://127.0.0.1/db", "postgresql://u@127.0.0.1/db",
          "postgresql+psycopg://u:p@127.0.0.1:5432/db", "postgres://127.0.0.1/db"]
    assert len({where("jdbc", uri=uri) for uri in pg}) == 1
    assert len({where("sql", uri=uri) for uri in ("jdbc:postgresql://DB.Example:5432/db",
                                                  "postgresql://db.example/db")}) == 1
    assert len({where("sql", uri=uri) for uri in ("mysql+pymysql://root@127.0.0.1/cat", "mysql://127.0.0.1:3306/cat",
                                                  "mariadb+pymysql://root@127.0.0.1:3306/cat")}) == 1
    assert len({where("jdbc", uri=uri) for uri in ("jdbc:sqlite:/d/catalog.db", "jdbc:sqlite:/d//catalog.db",
                                                   "sqlite:////d/x/../catalog.db")}) == 1
    others = ["jdbc:postgresql://127.0.0.1:5433/db", "jdbc:postgresql://127.0.0.1/db2", "mysql://127.0.0.1/db",
              "jdbc:sqlite:/d/other.db"]
    assert len({where("jdbc", uri=uri) for uri in others} | {where("jdbc", uri=pg[0])}) == 5

    doubled = make_sink({"type": "hadoop", "warehouse": "file:///w//wh"}).spec()
    assert table_key(doubled) == table_key(make_sink({"type": "hadoop", "warehouse": "/w/wh"}).spec())
    assert landed_key(doubled) == "iceberg@" + hashlib.sha1(b"hadoop:/w//wh").hexdigest()[:12] + ":ns.t"
    sqlite = make_sink({"type": "jdbc", "uri": "jdbc:sqlite:/d//c.db"}).spec()
    assert landed_key(sqlite) == located_key(sqlite) != table_key(sqlite)


@pytest.mark.parametrize("uri", ["http://cat:8181x", "http://cat:99999", "http://cat:0"])
def test_a_rest_uri_whose_port_is_no_port_is_refused_naming_the_option(uri):
    """Review N8 (low): the port was read only when the pipelines started (``ValueError: Port could
    not be cast to integer value``, no option named, retried as transient, and no Iceberg sink of
    the job opened): the job is refused when loaded, naming ``uri``."""
    from seatide.config.job import ConfigError
    from seatide.config.loader import load_job_text
    from seatide.plugin.options import OptionError

    job = f"""
env {{ job.mode = BATCH }}
source {{ FakeSource {{ row.num = 1, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Iceberg {{ table = t, iceberg.catalog.config = {{ type = rest, uri = "{uri}" }} }} }}
"""
    with pytest.raises((ConfigError, OptionError)) as info:
        load_job_text(job)
    assert "iceberg.catalog.config.uri" in str(info.value) and "1 to 65535" in str(info.value), str(info.value)
