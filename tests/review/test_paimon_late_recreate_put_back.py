"""Review of 12e88ea (B3): a Paimon RECREATE_SCHEMA carried out late renames the table's directory onto
its tombstone, asks the door again, and on a refusal renames it back (table_setup.drop_if_same). While
the directory is renamed away the table's name is free: a writer staging its next batch finds no table
and makes it (``PaimonTarget.stage`` -> ``ensure``, CREATE_SCHEMA_WHEN_NOT_EXIST) and commits there.
The rename back then fails (OSError: the directory is not empty), the door's refusal is replaced by
that OSError, and the rows committed before (10, by the fresh start, which the second look was added
to protect) stay in the tombstone: gone from the table (promise 1; promise 3: an OSError, not the
refusal). Same sequence as tests/contract/test_paimon_owed_recreate's third test, one batch more."""

from __future__ import annotations

import io
import os

import pytest

from seatide import failpoints
from seatide.connectors.paimon import table_setup
from seatide.plugin.base import SinkContext
from seatide.runtime.commit_log import write_json_atomic
from seatide.runtime.sink_runs import attempt_run, commit_log_of
from tests.contract.harness import rows
from tests.contract.systems import PaimonSystem
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _resumed, _write
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark
RECREATE = {"schema_save_mode": "RECREATE_SCHEMA"}


def _run(job, reporter, sink, spark, pipeline_id, directory, lineage, began):
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": lineage, "fingerprint": "f"})
    plugin_id = f"sink[{pipeline_id - 1}]"
    ctx = SinkContext(spark, job.job_id, pipeline_id, plugin_id, True, True, io.StringIO())
    run = attempt_run(sink, ctx, commit_log_of(directory, plugin_id, lineage), reporter, routes=None,
                      job_id=job.job_id, pipeline_id=pipeline_id, sink_index=pipeline_id - 1, lineage=lineage,
                      origin=lineage, began=began)
    run.roll_forward()
    return run


def test_a_late_recreate_refused_after_its_rename_puts_every_committed_row_back(spark, store, tmp_path, monkeypatch):
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    hit, created, held, fresh = failpoints.hit, table_setup._created, [], {}

    def at(name: str, *args, **kwargs):
        if name == "sink.save_modes_decided" and not held:
            raise DriverDied(name)
        if name == "paimon.before_drop" and held == ["died"]:
            held.append(name)         # the fresh start (APPEND_DATA) commits its batch 0 before the rename
            fresh["run"] = _run(job, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, dirs[1],
                                "L2", began=2)
            fresh["run"].write(rows(spark, [10]), 0)
        return hit(name, *args, **kwargs)

    def renamed_away(table_dir):
        if held == ["died", "paimon.before_drop"]:
            held.append("renamed")    # and its batch 1 while the table's directory is the tombstone
            fresh["run"].write(rows(spark, [11]), 1)
        return created(table_dir)

    monkeypatch.setattr(failpoints, "hit", at)
    monkeypatch.setattr(table_setup, "_created", renamed_away)
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    held.append("died")
    _resumed(store, job, started_over=1)
    reporter = _attempt(store, job)
    with pytest.raises(BaseException) as refused:
        _write(job, reporter, system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    assert held == ["died", "paimon.before_drop", "renamed"], held
    assert (type(refused.value).__name__, system.read(table)) == ("PermanentError", [1, 2, 10, 11]), refused.value


def test_a_driver_killed_right_after_the_rename_loses_no_batch_committed_before_it(spark, store, tmp_path, monkeypatch):
    """As tests/contract/test_paimon_owed_recreate's third test (10 committed while the late drop is held
    before its rename), but the driver is SIGKILLed right after the rename, before the second look and
    before the tombstone's marker. The next carrier finds no table (``get_table`` None) and takes the
    decision as carried out; the table is made again: 10 is in the tombstone, out of the table."""
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    hit, created, held = failpoints.hit, table_setup._created, []

    def at(name: str, *args, **kwargs):
        if name == "sink.save_modes_decided" and not held:
            raise DriverDied(name)
        if name == "paimon.before_drop" and held == ["died"]:
            held.append(name)
            _write(job, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, dirs[1], "L2", [10],
                   began=2)
        return hit(name, *args, **kwargs)

    def killed_after_rename(table_dir):
        if held == ["died", "paimon.before_drop"]:
            held.append("renamed")
            raise DriverDied("SIGKILL right after the rename")
        return created(table_dir)

    monkeypatch.setattr(failpoints, "hit", at)
    monkeypatch.setattr(table_setup, "_created", killed_after_rename)
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    held.append("died")
    _resumed(store, job, started_over=1)
    reporter = _attempt(store, job)
    with pytest.raises(DriverDied):
        _write(job, reporter, system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    assert held == ["died", "paimon.before_drop", "renamed"], held
    monkeypatch.setattr(failpoints, "hit", hit)
    monkeypatch.setattr(table_setup, "_created", created)
    try:        # the next attempt of pipeline 2 carries the decision out again
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 2, dirs[2], "M1", [20])
    except BaseException:
        pass    # refused: fine, if nothing committed is out of the table
    assert 10 in system.read(table), system.read(table)
