"""Outside review 2 of 5ad2a7f (promise 3: a refusal says exactly what happened and what to do). An
on-time RECREATE_SCHEMA (its driver alive) whose decision another job's commit follows before the
drop (at ``sink.save_modes_decided``) is refused by ``_nobody_since`` with the late carry-out's text:
"decided ... and never carried out (the driver that decided it ended first)" - its driver did not end."""

from __future__ import annotations

import pytest

from seatide import failpoints
from seatide.connectors.paimon.warehouse import PaimonError
from tests.contract.systems import PaimonSystem
from tests.contract.test_paimon_owed_recreate import RECREATE
from tests.contract.test_review8_save_mode_scopes import _job, _write
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def test_an_on_time_recreate_refused_over_a_concurrent_commit_does_not_say_its_driver_ended(
        spark, store, tmp_path, monkeypatch):
    system = PaimonSystem(str(tmp_path))
    table = system.new_target()
    system.put(table, [1, 2])
    job, dirs = _job(store, str(tmp_path / "job1"), 1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), 1)
    hit = failpoints.hit

    def another_job_commits(name, *args, **kwargs):
        if name == "sink.save_modes_decided":
            monkeypatch.setattr(failpoints, "hit", hit)
            _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1,
                   other_dirs[1], "L1", [10])
        return hit(name, *args, **kwargs)

    monkeypatch.setattr(failpoints, "hit", another_job_commits)
    with pytest.raises(PaimonError) as refused:
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    print(refused.value)
    assert "ended first" not in str(refused.value), refused.value
