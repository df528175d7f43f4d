"""Outside review of 1f2dd50 (promise: a late carry-out never destroys a batch committed by another writer).

Job 1's RECREATE_SCHEMA of T is decided in the store, its driver dies before the drop. Job 2, another
job (APPEND_DATA), then commits 10 into T. Job 1's next attempt carries its decision out late: the
decided identity still matches (T was never recreated), and the door's owed check knows only job 1's
own records (``store/owed_destroy.py``, ``store/kept_output.py`` by job id), so T is dropped with
job 2's committed batch. Real store (SQLite), real Paimon table of a filesystem warehouse."""

from __future__ import annotations

import os

import pytest

from seatide import failpoints
from tests.contract.systems import PaimonSystem
from tests.contract.test_paimon_owed_recreate import RECREATE
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _write, dies_at
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def test_a_late_recreate_keeps_a_batch_another_job_committed_since(spark, store, tmp_path, monkeypatch):
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "job1"), pipelines=1)
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("sink.save_modes_decided", hit))
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    monkeypatch.setattr(failpoints, "hit", hit)
    assert system.read(table) == [1, 2]                  # decided in the store, never carried out
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1],
           "L1", [10])
    assert system.read(table) == [1, 2, 10]             # job 2's batch committed
    try:        # job 1's next attempt carries its decision out late
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    except Exception as exc:  # noqa: BLE001 - a refusal keeps every row: fine
        print("job 1 refused:", exc)
    assert 10 in system.read(table), f"job 2's committed batch 10 was destroyed: T holds {system.read(table)}"
