"""Outside review 2 of 5ad2a7f (promise 2): ``_nobody_since`` tells the job's own commits by the prefix
``T_<job_id>_``; job ids may hold '_' (``store/job_ids.py``), so the commits of job ``<id>_2`` (another job,
``seatide run --job-id orders_2`` beside ``orders``) start with job ``<id>``'s prefix and count as its own.
Job 1's late RECREATE_SCHEMA then drops job 2's committed batch: the door knows job 1's records only."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import update

from seatide.store import schema as s
from tests.contract.harness import Pipeline
from tests.contract.test_paimon_owed_recreate import RECREATE, decided_never_dropped
from tests.contract.test_review8_save_mode_scopes import _attempt, _write
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def test_a_late_recreate_keeps_a_batch_of_a_job_whose_id_extends_this_ones(spark, store, tmp_path, monkeypatch):
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other = Pipeline(store, str(tmp_path / "job2"), job_id=f"{job.job_id}_2")      # another job
    other_dir = os.path.join(str(tmp_path / "job2"), other.job_id, "pipeline-1")
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == other.job_id).values(checkpoint_dir=other_dir))
    _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dir, "L1", [10])
    assert system.read(table) == [1, 2, 10]             # job 2's batch committed
    late = None
    try:                                                # job 1 carries its decision out late
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    except Exception as exc:
        late = exc
    assert 10 in system.read(table), (f"job {other.job_id}'s committed batch 10 dropped by job {job.job_id}'s late "
                                      f"RECREATE ({late or 'carried out'}): T holds {system.read(table)}")
