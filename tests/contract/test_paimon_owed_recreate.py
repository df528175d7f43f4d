"""Outside review (B3): a Paimon RECREATE_SCHEMA recorded and never carried out.

The door records the run's decision ``P_<run>@T`` ("drop the table of this identity") and the
driver dies before the drop (failpoint ``sink.save_modes_decided``). A fresh start of that pipeline
makes its save modes anew, under a scope of its own, and commits rows. Whoever prepares T next in
the run's scope (pipeline 2, not started over) finds the run's decision and carries it out late:
when the fresh start kept the table (APPEND_DATA), the drop took its committed rows with it. As
Jdbc's owed rule (``store/owed_destroy.py``): refused, nothing destroyed; when the fresh start
recreated the table itself, the decided table is gone and the late drop is skipped.

Pipelines of one job in a real store (SQLite), their sinks opened as a driver opens them, the
target a real Paimon table of a filesystem warehouse.
"""

from __future__ import annotations

import pytest

from seatide import failpoints
from seatide.plugin.base import PermanentError
from tests.contract.systems import PaimonSystem
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _resumed, _write, dies_at
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark

RECREATE = {"schema_save_mode": "RECREATE_SCHEMA"}


def decided_never_dropped(spark, store, tmp_path, monkeypatch, workdir: str = "checkpoints", pipelines: int = 2):
    """T holds 1, 2 from before the run. Pipeline 1's RECREATE_SCHEMA is decided, its driver dies before the
    drop. (job, dirs, system, T)"""
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / workdir), pipelines)
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("sink.save_modes_decided", hit))
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    monkeypatch.setattr(failpoints, "hit", hit)
    assert system.read(table) == [1, 2]                  # decided in the store, never carried out
    return job, dirs, system, table


def _decided_never_dropped_then_started_over(spark, store, tmp_path, monkeypatch, fresh_mode: dict):
    """``decided_never_dropped``, then pipeline 1 is started over (``fresh_mode``) and commits 10, 11."""
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch)
    _resumed(store, job, started_over=1)
    fresh = _write(job, _attempt(store, job), system.sink(table, **fresh_mode), spark, 1, dirs[1], "L2", [10, 11],
                   began=2)
    assert not fresh.replayed
    return job, dirs, system, table


def test_a_late_recreate_over_rows_a_fresh_start_committed_is_refused(spark, store, tmp_path, monkeypatch):
    """The fresh start kept the table (APPEND_DATA): the late drop would take its rows. Refused, nothing
    destroyed, the way on named."""
    job, dirs, system, table = _decided_never_dropped_then_started_over(
        spark, store, tmp_path, monkeypatch, {"data_save_mode": "APPEND_DATA"})
    assert system.read(table) == [1, 2, 10, 11]
    with pytest.raises(PermanentError, match="never carried out") as refused:
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    assert "nothing was destroyed" in str(refused.value) and "as a new job" in str(refused.value), refused.value
    assert system.read(table) == [1, 2, 10, 11], "the run's RECREATE_SCHEMA, carried out late, dropped committed rows"


def test_a_late_recreate_after_the_fresh_start_recreated_the_table_is_skipped(spark, store, tmp_path, monkeypatch):
    """The fresh start recreated T itself (its own scope's RECREATE_SCHEMA) and committed 10, 11: the
    decided table is gone, nothing of the run's decision is owed, and pipeline 2 appends."""
    job, dirs, system, table = _decided_never_dropped_then_started_over(spark, store, tmp_path, monkeypatch, RECREATE)
    assert system.read(table) == [10, 11]
    _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    assert system.read(table) == [10, 11, 20], "the run's decision, carried out late, took the fresh start's rows"


def carried_out_late(spark, store, job, dirs, system, table, held: list, shared: dict) -> BaseException:
    """The run's RECREATE_SCHEMA decided by pipeline 1, whose driver dies (``held`` gets "died"); incarnation
    2 starts pipeline 1 over (its attempt's reporter in ``shared``) and pipeline 2 carries the decision out
    late: what pipeline 2's write raised."""
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    held.append("died")
    _resumed(store, job, started_over=1)
    shared["reporter"] = _attempt(store, job)
    with pytest.raises(BaseException) as raised:
        _write(job, shared["reporter"], system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    return raised.value


def test_a_late_recreate_sees_a_batch_committed_between_its_look_and_its_drop(spark, store, tmp_path, monkeypatch):
    """Pipeline 2 finds the run's decision owed (nothing committed since), and is held right before its
    drop (``paimon.before_drop``) while pipeline 1, started over with APPEND_DATA, commits 10. Asked again
    once the table is renamed away, the decision is refused and the table put back with every row."""
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    hit, held, shared = failpoints.hit, [], {}

    def at(name: str, *args, **kwargs):
        if name == "sink.save_modes_decided" and not held:
            raise DriverDied(name)
        if name == "paimon.before_drop" and held == ["died"]:
            held.append(name)
            _write(job, shared["reporter"], system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, dirs[1], "L2",
                   [10],
                   began=2)
        return hit(name, *args, **kwargs)

    monkeypatch.setattr(failpoints, "hit", at)
    raised = carried_out_late(spark, store, job, dirs, system, table, held, shared)
    assert isinstance(raised, PermanentError) and "never carried out" in str(raised), raised
    assert held == ["died", "paimon.before_drop"], held
    assert system.read(table) == [1, 2, 10], "the late drop took a batch committed while it was held"
