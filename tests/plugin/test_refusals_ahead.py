"""Save modes that refuse are asked before any target of the job is destroyed (``SinkRun.check_ahead`` through
``SaveModeDoor.check_ahead``), and only where a refusal could still stand: never over a decision that stands,
never for a target the sink wrote, never when nothing of the job destroys (outside review of e20cc14..8348a57, A).
On sinks made for the test (no Spark), driven as the runtime's ``check_sinks_ahead`` drives them."""

from __future__ import annotations

import pytest

from seatide.plugin.sink_protocol import SaveModeDoor, SinkRun, SinkTargets
from seatide.plugin.tables import TableRoute
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog
from tests.plugin.test_sink_protocol import Shelf, frames


class Emptied(Shelf):
    """DROP_DATA: removes what it holds when prepared."""

    destroys = True


class Guarded(Shelf):
    """ERROR_WHEN_DATA_EXISTS: refuses when it holds rows, destroys nothing; each look is counted."""

    def save_mode_plan(self, schema):
        self.world.setdefault("looks", []).append(self.key)
        if self.world.get(self.key):
            raise ValueError(f"{self.key} holds rows and its save mode is ERROR_WHEN_DATA_EXISTS")
        return None


class Mixed(SinkTargets):
    """A target per route; ``emptied`` names those whose save mode empties them, the others refuse rows."""

    def __init__(self, routes, world, emptied=()):
        self.world, self.emptied = world, emptied
        super().__init__(None, routes, True)

    def target_key(self, route):
        return route.name

    def open_target(self, key, routes):
        return (Emptied if key in self.emptied else Guarded)(key, routes, self.world)


A, B = TableRoute(0, "db.a", None, None), TableRoute(1, "db.b", None, None)


def sink(tmp_path, name, world, routes, emptied=(), decisions=None, scope="P") -> SinkRun:
    log = SinkCommitLog(str(tmp_path / name))
    decisions = decisions or FileDecisions(log)
    return SinkRun(Mixed(routes, world, emptied), log, decisions, SaveModeDoor(decisions, scope), f"T_{name}_")


def check_ahead(*runs: SinkRun) -> None:
    """As ``runtime.driver.check_sinks_ahead``: every sink's checks, when any of them destroys ahead."""
    destroys = any(run.destroys_ahead() for run in runs)
    for run in runs:
        run.check_ahead(None, destroys)


def test_a_sinks_refusal_comes_before_another_sinks_save_mode_empties_its_target(tmp_path):
    world = {"db.a": ["kept"], "db.b": ["there"]}
    emptying, refusing = sink(tmp_path, "a", world, [A], emptied=("db.a",)), sink(tmp_path, "b", world, [B])
    with pytest.raises(ValueError, match="ERROR_WHEN_DATA_EXISTS"):
        check_ahead(emptying, refusing)
    assert world["db.a"] == ["kept"]


def test_within_one_sink_a_targets_refusal_comes_before_another_targets_save_mode(tmp_path):
    """No check ahead by the runtime (a sink driven alone): its first batch asks its targets' refusals
    before it prepares the first one."""
    world = {"db.a": ["kept"], "db.b": ["there"]}
    with pytest.raises(ValueError, match="ERROR_WHEN_DATA_EXISTS"):
        sink(tmp_path, "ab", world, [A, B], emptied=("db.a",)).write(frames({}), 0)
    assert world["db.a"] == ["kept"]


def test_a_refusal_is_not_made_ahead_over_a_decision_that_stands(tmp_path):
    """Another writer of the job decided the target's save modes (it was empty then) and wrote rows into it:
    its decision stands for every writer of the job, so neither the look ahead nor the first batch refuses."""
    world = {"db.a": ["kept"]}
    decisions = FileDecisions(SinkCommitLog(str(tmp_path / "store")))
    first = sink(tmp_path, "first", world, [B], decisions=decisions)
    first.write(frames({1: [(1,)]}), 0)
    assert world["db.b"] == [1]
    second = sink(tmp_path, "second", world, [B], decisions=decisions)
    check_ahead(sink(tmp_path, "a", world, [A], emptied=("db.a",)), second)
    second.write(frames({1: [(2,)]}), 0)
    assert world["db.b"] == [1, 2]


def test_a_target_the_sink_wrote_is_not_refused_ahead_when_it_resumes(tmp_path):
    """A resume (here in a scope where no decision is found, so only the sink's own record of what it wrote
    stands between its rows and a refusal): no look at the target it wrote, nothing refused."""
    world = {"db.a": ["kept"]}
    sink(tmp_path, "b", world, [B]).write(frames({1: [(1,)]}), 0)
    looks = len(world["looks"])
    check_ahead(sink(tmp_path, "a", world, [A], emptied=("db.a",)), sink(tmp_path, "b", world, [B], scope="Q"))
    assert len(world["looks"]) == looks


def test_no_refusal_is_asked_ahead_when_no_save_mode_of_the_job_destroys(tmp_path):
    """Nothing is destroyed, so a refusal at the target's own first batch loses nothing: no look ahead."""
    world = {"db.b": ["there"]}
    refusing = sink(tmp_path, "b", world, [B])
    check_ahead(refusing)
    assert "looks" not in world
    with pytest.raises(ValueError, match="ERROR_WHEN_DATA_EXISTS"):
        refusing.write(frames({}), 0)
