"""Outside review of 12e88ea (B3): a Paimon RECREATE_SCHEMA carried out late renames the table's directory
onto its tombstone, asks the door again, and on a refusal renames it back (recreate.drop_if_same).
While renamed away, the table's name was free.

The tests follow tests/contract/test_paimon_owed_recreate's third test: the run's RECREATE_SCHEMA is
decided, its driver dies; pipeline 1 is started over (APPEND_DATA); pipeline 2 carries the decision out
late and is held before its rename while the fresh start commits 10. Then, right after the rename:

* the fresh start stages its next batch and finds no table: it made one and committed 11 there, the
  rename back failed (raw OSError, directory not empty) and 10 stayed in the tombstone. Now a SeaTide
  writer waits for the table's lock, which the late recreate holds alone until its end
  (tests/connectors/test_paimon_recreate_lock.py);
* a writer outside SeaTide makes the table there and commits 11: the put-back is refused with a
  PermanentError naming the tombstone that holds the rows and how to restore it, never a raw OSError;
* or the driver is SIGKILLed (before the second look): the next carrier found no table and took the
  decision as carried out, 10 out of the table. Now it puts the tombstone's table back and asks again.

Pipelines of one job in a real store (SQLite), a real Paimon table of a filesystem warehouse. The
moment right after the rename has no failpoint: the test hooks ``recreate._created``, the first
call after it."""

from __future__ import annotations

import io
import os

import pytest

from seatide import failpoints
from seatide.connectors.paimon import recreate
from seatide.plugin.base import SinkContext
from seatide.runtime.commit_log import write_json_atomic
from seatide.runtime.sink_runs import attempt_run, commit_log_of
from tests.contract.harness import rows
from tests.contract.systems import PaimonSystem
from tests.contract.test_paimon_owed_recreate import RECREATE, carried_out_late
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _write
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def _run(job, reporter, sink, spark, directory, lineage):
    """Pipeline 1's fresh start (begun by incarnation 2) as its driver opens it, kept for a second batch."""
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": lineage, "fingerprint": "f"})
    ctx = SinkContext(spark, job.job_id, 1, "sink[0]", True, True, io.StringIO())
    run = attempt_run(sink, ctx, commit_log_of(directory, "sink[0]", lineage), reporter, routes=None,
                      job_id=job.job_id, pipeline_id=1, sink_index=0, lineage=lineage, origin=lineage, began=2)
    run.roll_forward()
    return run


def _late_recreate(spark, store, tmp_path, monkeypatch, after_rename):
    """Up to pipeline 2's late drop, ``after_rename(fresh_run, system, table)`` called right after its rename; what
    pipeline 2's write raised. (raised, job, dirs, system, table)"""
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    hit, created, held, fresh, shared = failpoints.hit, recreate._created, [], {}, {}

    def at(name: str, *args, **kwargs):
        if name == "sink.save_modes_decided" and not held:
            raise DriverDied(name)
        if name == "paimon.before_drop" and held == ["died"]:
            held.append(name)         # the fresh start commits its batch 0 before the rename
            fresh["run"] = _run(job, shared["reporter"], system.sink(table, data_save_mode="APPEND_DATA"), spark,
                                dirs[1], "L2")
            fresh["run"].write(rows(spark, [10]), 0)
        return hit(name, *args, **kwargs)

    def renamed_away(table_dir):
        if held == ["died", "paimon.before_drop"]:
            held.append("renamed")
            after_rename(fresh["run"], system, table)
        return created(table_dir)

    monkeypatch.setattr(failpoints, "hit", at)
    monkeypatch.setattr(recreate, "_created", renamed_away)
    raised = carried_out_late(spark, store, job, dirs, system, table, held, shared)
    assert held == ["died", "paimon.before_drop", "renamed"], held
    monkeypatch.setattr(failpoints, "hit", hit)
    monkeypatch.setattr(recreate, "_created", created)
    return raised, job, dirs, system, table


def test_a_table_made_outside_seatide_meanwhile_is_refused_naming_the_tombstone(spark, store, tmp_path, monkeypatch):
    raised, _, _, system, table = _late_recreate(
        spark, store, tmp_path, monkeypatch, lambda fresh_run, system, table: system.put(table, [11]))
    tombstone = str(raised).split(" renamed it to ", 1)[1].split(" and was refused", 1)[0]
    assert type(raised).__name__ == "PaimonError" and "Nothing was deleted" in str(raised), raised
    assert f"rename {tombstone} to" in str(raised) and system.read(table) == [11], raised
    assert os.path.isdir(os.path.join(tombstone, "snapshot")), "the committed rows are not in the named tombstone"


def test_a_driver_killed_right_after_the_rename_loses_no_batch_committed_before_it(spark, store, tmp_path, monkeypatch):
    def killed(fresh_run, system, table):
        raise DriverDied("SIGKILL right after the rename")

    raised, job, dirs, system, table = _late_recreate(spark, store, tmp_path, monkeypatch, killed)
    assert isinstance(raised, DriverDied), raised
    try:        # the next attempt of pipeline 2 carries the decision out again
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    except Exception:
        pass    # a refusal is fine, if nothing committed is out of the table
    assert 10 in system.read(table), system.read(table)
