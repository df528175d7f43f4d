"""A late (or on-time) RECREATE_SCHEMA never destroys another writer's batch: committed, or decided and not
yet committed (outside reviews of 1f2dd50 and of 5ad2a7f..506684a; these tests failed before their fixes).

Job 1's RECREATE_SCHEMA of T is decided in the store, its driver dies before the drop. Job 2, another
job (APPEND_DATA), then commits 10 into T. Job 1's next attempt carries its decision out late: the
decided identity still matches (T was never recreated), and the door's owed check knows only job 1's
own records (``store/owed_destroy.py``, ``store/kept_output.py`` by job id), so T is dropped with
job 2's committed batch. (Fixed: the decision records the table's newest snapshot then, and a
snapshot committed since by anyone but job 1 refuses it.)

Review 2: a batch job 2 decided in its store and has not committed to Paimon (its driver died after
the decision, or its commit raised once and its hold was let go) was invisible to that check, and
dropped for good (H1: now on record in ``.<t>.seatide-pending/`` until committed); job ``<id>_2``'s
commits started with job ``<id>``'s prefix and counted as its own (H2); an on-time RECREATE refused
said its driver had ended (L2). Real store (SQLite), real Paimon table of a filesystem warehouse."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import update

from seatide import failpoints
from seatide.connectors.paimon.warehouse import PaimonError
from seatide.store import schema as s
from tests.contract.harness import Pipeline
from tests.contract.systems import PaimonSystem
from tests.contract.test_paimon_owed_recreate import RECREATE, decided_never_dropped
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _write, dies_at
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


def test_a_late_recreate_keeps_a_batch_of_a_job_whose_id_extends_this_ones(spark, store, tmp_path, monkeypatch):
    """Job ids may hold '_': job ``<id>_2``'s commit users start ``T_<id>_`` too, and are not job ``<id>``'s."""
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other = Pipeline(store, str(tmp_path / "job2"), job_id=f"{job.job_id}_2")      # another job
    other_dir = os.path.join(str(tmp_path / "job2"), other.job_id, "pipeline-1")
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == other.job_id).values(checkpoint_dir=other_dir))
    _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dir, "L1", [10])
    assert system.read(table) == [1, 2, 10]             # job 2's batch committed
    with pytest.raises(PaimonError, match=f"committed since by 'T_{other.job_id}_1_0_L1_'"):
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    assert 10 in system.read(table), f"job {other.job_id}'s committed batch 10 dropped: T holds {system.read(table)}"


def _refused_over_a_pending_batch(job, dirs, system, table, store, spark) -> None:
    """Job 1 carries its decision out late, while job 2's batch 0 (10) is decided and not in Paimon: refused."""
    with pytest.raises(PaimonError, match="another job has staged a batch and not committed it yet") as refused:
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    said = str(refused.value)
    assert "batch 0 of job" in said and ".seatide-pending" in said and "resume that job" in said, said
    assert "ended first" in said, said          # carried out late: its decider ended
    assert system.read(table) == [1, 2], system.read(table)


def test_a_late_recreate_keeps_a_batch_another_job_decided_and_has_not_published(spark, store, tmp_path,
                                                                               monkeypatch):
    """Job 2's driver dies right after deciding batch 0 (its hold goes with it); job 1's late RECREATE is
    refused; job 2's resume rolls the batch forward."""
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("sink.after_decision", hit))
    with pytest.raises(DriverDied):     # job 2's batch 0 decided (committed), not yet in Paimon
        _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1],
               "L1", [10])
    monkeypatch.setattr(failpoints, "hit", hit)
    _refused_over_a_pending_batch(job, dirs, system, table, store, spark)
    _write(other, _attempt(store, other), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1,
           other_dirs[1], "L1", [10])
    assert system.read(table) == [1, 2, 10]
    database, name = table.split(".")
    pending = os.path.join(system.warehouse, f"{database}.db", f".{name}.seatide-pending")
    assert not os.listdir(pending), f"the committed batch's record stayed: {os.listdir(pending)}"


class CommitFailed(RuntimeError):
    """A transient failure of the Paimon commit (a full disk, an I/O error): the driver lives and retries."""


def test_a_live_writers_decided_batch_whose_commit_failed_once_is_kept(spark, store, tmp_path, monkeypatch):
    """No death at all: job 2's commit fails once (``paimon.before_commit``) and its hold is let go while the
    batch is decided; job 1's late RECREATE in that window is refused; job 2's retry commits it."""
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    hit = failpoints.hit

    def commit_fails(name, *args, **kwargs):
        if name == "paimon.before_commit":
            raise CommitFailed(name)
        return hit(name, *args, **kwargs)

    reporter = other.attempt()
    monkeypatch.setattr(failpoints, "hit", commit_fails)
    with pytest.raises(CommitFailed):
        _write(other, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1], "L1", [10])
    monkeypatch.setattr(failpoints, "hit", hit)
    _refused_over_a_pending_batch(job, dirs, system, table, store, spark)
    _write(other, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1], "L1", [10])
    assert system.read(table) == [1, 2, 10]


def test_an_on_time_recreate_refused_over_a_concurrent_commit_does_not_say_its_driver_ended(
        spark, store, tmp_path, monkeypatch):
    """Another job commits between this job's decision and its drop (``sink.save_modes_decided``)."""
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
    with pytest.raises(PaimonError, match="decided just now") as refused:
        _write(job, job.attempt(), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    assert "ended first" not in str(refused.value), refused.value
    assert system.read(table) == [1, 2, 10]


def test_a_late_recreate_goes_on_over_a_batch_another_job_never_decided_and_its_resume_writes_it_once(
        spark, store, tmp_path, monkeypatch):
    """Job 2's driver dies right before deciding batch 0 (staged, on record, never decided: its next attempt
    stages it afresh). Job 1's late RECREATE clears the record and goes on (before: refused until job 2
    committed or the record was removed by hand). Job 2's resume writes its rows once, into the table
    recreated, as a Flink job's uncommitted rows are written again on recovery into the table there now."""
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("sink.before_decision", hit))
    with pytest.raises(DriverDied):
        _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1],
               "L1", [10])
    monkeypatch.setattr(failpoints, "hit", hit)
    database, name = table.split(".")
    pending = os.path.join(system.warehouse, f"{database}.db", f".{name}.seatide-pending")
    assert len(os.listdir(pending)) == 1, os.listdir(pending)
    _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    assert system.read(table) == [5], system.read(table)
    assert not os.listdir(pending), f"the undecided batch's record stayed: {os.listdir(pending)}"
    _write(other, _attempt(store, other), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1,
           other_dirs[1], "L1", [10])
    assert system.read(table) == [5, 10]
