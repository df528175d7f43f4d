"""Outside review 2 of 5ad2a7f..506684a (promises 1, 2): a late RECREATE_SCHEMA over another job's batch that
is decided (committed in SeaTide's protocol) but not yet published.

Job 1's RECREATE_SCHEMA of T is decided, its driver dies before the drop. Job 2 (APPEND_DATA) stages
batch 0 (10), decides it in the store, and its driver dies at ``sink.after_decision``, before the Paimon
commit: its shared hold goes with it (a SIGKILL's kernel close; in this process SinkRun.write's
``finally: let_go``, the same as a publish that merely raised). Job 1's next attempt carries its decision
out: ``_nobody_since`` looks at snapshots only, sees none since, takes the lock alone and drops T with
job 2's staged files. Job 2's resume rolls its decided batch forward and is refused for ever."""

from __future__ import annotations

import pytest

from seatide import failpoints
from tests.contract.test_paimon_owed_recreate import RECREATE, decided_never_dropped
from tests.contract.test_review8_save_mode_scopes import DriverDied, _attempt, _job, _write, dies_at
from tests.contract.test_sinks import store  # noqa: F401 - fixture

pytestmark = pytest.mark.spark


def test_a_late_recreate_keeps_a_batch_another_job_decided_and_has_not_published(spark, store, tmp_path,
                                                                               monkeypatch):
    job, dirs, system, table = decided_never_dropped(spark, store, tmp_path, monkeypatch, "job1", pipelines=1)
    other, other_dirs = _job(store, str(tmp_path / "job2"), pipelines=1)
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("sink.after_decision", hit))
    with pytest.raises(DriverDied):     # job 2's batch 0 decided (committed), not yet in Paimon
        _write(other, other.attempt(), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1],
               "L1", [10])
    monkeypatch.setattr(failpoints, "hit", hit)
    late = None
    try:                                # job 1 carries its decision out late
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    except Exception as exc:            # a refusal is the right answer
        late = exc
    resumed = None
    try:                                # job 2 resumes: its decided batch rolled forward
        _write(other, _attempt(store, other), system.sink(table, data_save_mode="APPEND_DATA"), spark, 1,
               other_dirs[1], "L1", [10])
    except Exception as exc:
        resumed = exc
    assert 10 in system.read(table), (
        f"job 2's decided batch 10 lost: T holds {system.read(table)}; job 1's late RECREATE: "
        f"{late or 'carried out'}; job 2's resume: {resumed}")


class CommitFailed(RuntimeError):
    """A transient failure of the Paimon commit (a full disk, an I/O error): the driver lives and retries."""


def test_a_live_writers_decided_batch_whose_commit_failed_once_is_kept(spark, store, tmp_path, monkeypatch):
    """No death at all: job 2's commit fails once (``paimon.before_commit``), SinkRun.write's ``finally``
    lets its hold go (5ad2a7f) while the batch is decided; job 1's late RECREATE runs in that window."""
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
    late = None
    try:
        _write(job, _attempt(store, job), system.sink(table, **RECREATE), spark, 1, dirs[1], "L1", [5])
    except Exception as exc:
        late = exc
    retried = None
    try:                                # job 2's same attempt retries the batch
        _write(other, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, other_dirs[1], "L1", [10])
    except Exception as exc:
        retried = exc
    assert 10 in system.read(table), (
        f"job 2's decided batch 10 lost: T holds {system.read(table)}; job 1's late RECREATE: "
        f"{late or 'carried out'}; job 2's retry: {retried}")
