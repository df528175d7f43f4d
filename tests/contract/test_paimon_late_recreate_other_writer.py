"""Outside review of 1f2dd50 (promise: a late carry-out never destroys a batch committed by another writer).

Job 1's RECREATE_SCHEMA of T is decided in the store, its driver dies before the drop. Job 2, another
job (APPEND_DATA), then commits 10 into T. Job 1's next attempt carries its decision out late: the
decided identity still matches (T was never recreated), and the door's owed check knows only job 1's
own records (``store/owed_destroy.py``, ``store/kept_output.py`` by job id), so T is dropped with
job 2's committed batch. (Fixed: the decision records the table's newest snapshot then, and a
snapshot committed since by anyone but job 1 refuses it.) Real store (SQLite), real Paimon
table of a filesystem warehouse."""

from __future__ import annotations

import pytest

from seatide.connectors.paimon.warehouse import PaimonError
from tests.contract.test_paimon_owed_recreate import RECREATE, decided_never_dropped
from tests.contract.test_review8_save_mode_scopes import _attempt, _job, _write
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def test_a_late_recreate_keeps_a_batch_another_job_committed_since(spark, store, tmp_path, monkeypatch):
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1],
           "L1", [10])
    assert system.read(table) == [1, 2, 10]             # job 2's batch committed
    with pytest.raises(PaimonError, match="committed since by .* not this job") as refused:    # carried out late
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    assert table in str(refused.value) and "as a new job" in str(refused.value), refused.value
    assert 10 in system.read(table), f"job 2's committed batch 10 was destroyed: T holds {system.read(table)}"
