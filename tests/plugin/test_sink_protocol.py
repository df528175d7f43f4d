"""The one sink protocol's own rules, on a sink made for the test (no Spark write): targets shared by
routes, the order of one key's changes across routes, and records written before targets existed."""

from __future__ import annotations

import pytest

from seatide.plugin.base import Batch, StagedBatch
from seatide.plugin.rowkind import ROW_KIND_COLUMN, ROW_SEQ_COLUMN
from seatide.plugin.sink_protocol import SaveModeDoor, SinkRun, SinkTargets, Target, TargetRows
from seatide.plugin.tables import TableFrames, TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog


class Shelf(Target):
    """A target that keeps what it is given in memory and removes everything as its save mode."""

    save_modes = True

    def __init__(self, key, routes, world):
        super().__init__(key, routes)
        self.world = world

    def save_mode_plan(self, schema):
        return {"remove": sorted(self.world.setdefault(self.key, []))}

    def destroy(self, plan, fence):
        self.world[self.key] = [row for row in self.world.get(self.key, []) if row not in plan["remove"]]

    def stage(self, rows: TargetRows, batch: Batch) -> StagedBatch:
        local = [row[0] for part in rows.parts for row in part.local]
        return StagedBatch({"rows": local}, {"rows": len(local)})

    def publish(self, part):
        self.world.setdefault(self.key, []).extend(part["rows"])


class Shelves(SinkTargets):
    def __init__(self, routes, multi, world, shared=True):
        self.world, self.shared = world, shared
        super().__init__(None, routes, multi)

    def target_key(self, route):
        return "shelf" if self.shared else route.name

    def open_target(self, key, routes):
        return Shelf(key, routes, self.world)


def frames(by_route: dict[int, list[tuple]]) -> TableFrames:
    return TableFrames({i: None for i in by_route}, schema_of=lambda _i: None, local=by_route)


def run(tmp_path, world, routes, multi=True, shared=True) -> SinkRun:
    log = SinkCommitLog(str(tmp_path / "log"))
    decisions = FileDecisions(log)
    return SinkRun(Shelves(routes, multi, world, shared), log, decisions, SaveModeDoor(decisions, "P"), "T")


ROUTES = [TableRoute(0, "db.a", None, None), TableRoute(1, "db.b", None, None)]


def test_a_target_is_prepared_once_for_every_route_and_restart(tmp_path):
    world = {"shelf": ["old"]}
    sink = run(tmp_path, world, ROUTES)
    sink.write(frames({0: [(1,)]}), 0)
    sink.write(frames({1: [(2,)]}), 1)                     # b first seen: no second save mode
    run(tmp_path, world, ROUTES).write(frames({1: [(3,)]}), 2)   # a restart: none either
    assert world["shelf"] == [1, 2, 3]


def test_every_target_is_prepared_at_the_first_batch_with_its_rows_or_none(tmp_path):
    """A first batch without rows prepares every target (as SeaTunnel makes every table's save
    modes at the job's start); a restart before a target's first rows carries out the decision
    taken then, removing nothing written since."""
    world = {"db.a": ["old"], "db.b": ["old"]}
    run(tmp_path, world, ROUTES, shared=False).write(frames({}), 0)
    assert world == {"db.a": [], "db.b": []}
    world["db.b"].append("other")
    run(tmp_path, world, ROUTES, shared=False).write(frames({0: [(1,)]}), 1)
    assert world == {"db.a": [1], "db.b": ["other"]}


def test_a_state_and_a_manifest_written_before_targets_existed_are_read_as_their_tables(tmp_path):
    """A multi-table sink's checkpoint from before the protocol: each table's state under its name,
    a decided batch's parts under its route's key. Its tables count as written (their save modes are
    not made again), and the decided batch is published to their target."""
    world = {"shelf": ["old", 9]}
    log = SinkCommitLog(str(tmp_path / "log"))
    log.commit(0, {"rows": 1, "tables": {"db.a": {"rows": 1, "total_rows": 1}}})
    FileDecisions(log).decide(1, "T1", {"publish": {"tables": {ROUTES[1].key: {"rows": [10]}}},
                                        "state": {"rows": 1, "tables": {"db.b": {"rows": 1}}}})
    sink = run(tmp_path, world, ROUTES)
    assert sink.roll_forward() == [1]
    sink.write(frames({0: [(2,)]}), 2)
    assert world["shelf"] == ["old", 9, 10, 2]


def test_a_single_tables_flat_state_counts_its_one_target_as_written(tmp_path):
    world = {"db.a": ["old"]}
    log = SinkCommitLog(str(tmp_path / "log"))
    log.commit(0, {"rows": 3, "files": [], "total_rows": 3})
    run(tmp_path, world, ROUTES[:1], multi=False, shared=False).write(frames({0: [(4,)]}), 1)
    assert world["db.a"] == ["old", 4]


@pytest.mark.spark
def test_one_keys_changes_keep_their_order_across_the_routes_of_a_target(spark):
    """Key 7 deleted from route 1 (sequence 5), then inserted into route 0 (sequence 9): the target's
    rows in ``__row_seq`` order end with the insert, collected or as one frame."""
    from pyspark.sql.types import StructType

    from seatide.plugin.sink_protocol import RoutePart

    schema = StructType.fromDDL(f"id bigint, {ROW_KIND_COLUMN} tinyint, {ROW_SEQ_COLUMN} bigint")
    changes = {0: [(7, 0, 9), (8, 0, 2)], 1: [(7, 3, 5)]}
    table_frames = TableFrames({i: spark.createDataFrame(rows, schema) for i, rows in changes.items()},
                               schema_of=lambda _i: schema, local=changes)
    rows = TargetRows(tuple(RoutePart(route, "T", table_frames) for route in ROUTES), table_frames)
    assert [r for r in rows.local_in_order() if r[0] == 7] == [(7, 3, 5), (7, 0, 9)]
    ordered = rows.union().orderBy(ROW_SEQ_COLUMN).where("id = 7").collect()
    assert [(r[ROW_KIND_COLUMN], r[ROW_SEQ_COLUMN]) for r in ordered] == [(3, 5), (0, 9)]
