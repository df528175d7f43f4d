"""Outside review 8: whose save-mode decision a pipeline started over follows.

F (regression of 390ca8d): pipeline 2 never began a batch in the run's first lineage (it never reached
its door); pipeline 1 (DROP_DATA, not started over) prepared the shared table and committed. Started
over, pipeline 2 made a decision of its own (``P_<run>~<began>``) instead of following the run's, and
its DROP_DATA was refused over pipeline 1's rows: it has nothing of its own there to drop.

B: a Jdbc save-mode decision recorded and never carried out.

A Jdbc plan records its decision in the store (the door's ``decide_save_modes``) under the target
database's named lock, then DELETEs (connectors/jdbc/save_modes.py). A driver that dies between the
two (failpoint ``jdbc.save_mode_decided``) leaves the run's decision ``P_<run>@T`` saying destroy,
never carried out. A fresh start of that pipeline makes its save modes anew (``P_<run>~<began>``):
its DELETE, then its rows. Pipeline 2, not started over, first prepares T later: it finds the run's
decision and the door carries it out. Its DELETE took the fresh start's committed rows (the rows of
the table before the run were already gone: nothing of the run's decision was owed).

Pipelines of one job in a real store (SQLite), their sinks opened as a driver opens them
(``runtime.sink_runs.attempt_run``), the target a real PostgreSQL (and MariaDB) table.
"""

from __future__ import annotations

import io
import json
import os
import time

import pytest
from sqlalchemy import insert, select, update

from seatide import failpoints
from seatide.plugin.base import PermanentError, SinkContext
from seatide.runtime.commit_log import write_json_atomic
from seatide.runtime.reporter import AttemptReporter
from seatide.runtime.sink_runs import attempt_run, commit_log_of
from seatide.store import schema as s
from tests.contract.harness import Pipeline, rows
from tests.contract.systems import JdbcSystem, LocalFileSystem
from tests.contract.test_sinks import mariadb_database, postgresql_database, store  # noqa: F401 - fixtures

pytestmark = pytest.mark.spark


class DriverDied(BaseException):
    """The driver killed at a failpoint (``kill``), in this process: no handler of the runtime's catches it,
    and the target database's session ends (its named lock with it)."""


def dies_at(failpoint: str, hit):
    """``failpoints.hit`` that kills the driver at ``failpoint`` (``DriverDied``) and is ``hit`` elsewhere."""
    def at(name: str, *args, **kwargs):
        if name == failpoint:
            raise DriverDied(name)
        return hit(name, *args, **kwargs)

    return at


def _resumed(store, job: Pipeline, started_over: int, *more: int) -> None:
    """The job's incarnation 2, which starts pipeline ``started_over`` (and ``more``) over (the resume's decision)."""
    with store.write() as conn:
        olds = conn.execute(s.pipelines.select().where(s.pipelines.c.job_id == job.job_id)).all()
        for old in olds:
            conn.execute(insert(s.pipelines).values({**old._asdict(), "incarnation": 2, "status": "CREATED",
                                                     "started_batch": None, "started_lineage": None}))
        over = (started_over, *more)
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job.job_id).values(incarnation=2, restore=json.dumps(
            {"prepare": {str(p): None for p in over}, "fresh": [{"pipeline": p, "problem": "lost"} for p in over]})))


def _attempt(store, job: Pipeline) -> AttemptReporter:
    """A new current attempt of the job's incarnation."""
    with store.write() as conn:
        incarnation = conn.execute(select(s.jobs.c.incarnation).where(s.jobs.c.job_id == job.job_id)).scalar()
        conn.execute(update(s.attempts).where(s.attempts.c.job_id == job.job_id).values(state="LOST"))
        number = len(conn.execute(select(s.attempts.c.attempt_id).where(s.attempts.c.job_id == job.job_id)).all())
        attempt = conn.execute(insert(s.attempts).values(
            job_id=job.job_id, incarnation=incarnation, number=number + 1, worker_id="w", state="RUNNING",
            created_at=time.time(), kill_requested=False)).inserted_primary_key[0]
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == job.job_id).values(current_attempt=attempt))
    return AttemptReporter(store, job.job_id, incarnation, attempt)


def _job(store, workdir: str, pipelines: int = 2) -> tuple[Pipeline, dict[int, str]]:
    """A job whose pipelines 1 .. ``pipelines`` have checkpoint directories of their own (the store's rows name them)."""
    job = Pipeline(store, workdir)
    dirs = {p: os.path.join(workdir, job.job_id, f"pipeline-{p}") for p in range(1, pipelines + 1)}
    with store.write() as conn:
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == job.job_id).values(checkpoint_dir=dirs[1]))
        for p in range(2, pipelines + 1):
            conn.execute(insert(s.pipelines).values(
                job_id=job.job_id, incarnation=1, pipeline_id=p, status="RUNNING", fingerprint="f",
                checkpoint_dir=dirs[p], rows_read=0, rows_written=0, idle=False))
    return job, dirs


def _write(job, reporter, sink, spark, pipeline_id: int, directory: str, lineage: str, ids, began=None):
    """Batch 0 of ``pipeline_id``'s lineage ``lineage`` (begun by the fresh start of ``began``), as its driver writes it."""
    write_json_atomic(os.path.join(directory, "seatide.json"), {"lineage": lineage, "fingerprint": "f"})
    plugin_id = f"sink[{pipeline_id - 1}]"
    ctx = SinkContext(spark, job.job_id, pipeline_id, plugin_id, True, True, io.StringIO())
    run = attempt_run(sink, ctx, commit_log_of(directory, plugin_id, lineage), reporter, routes=None,
                      job_id=job.job_id, pipeline_id=pipeline_id, sink_index=pipeline_id - 1, lineage=lineage,
                      origin=lineage, began=began)
    run.roll_forward()
    return run.write(rows(spark, ids), 0)


def _run_decision_never_carried_out(spark, store, tmp_path, monkeypatch, request, server: str):
    """Table T holds 1, 2 from before the run; pipeline 1's DROP_DATA is decided and its driver dies before
    the DELETE. The failpoint stays armed (the next decision dies too); ``hit``, the real one, restores it.
    (job, dirs, system, T, hit)"""
    system = JdbcSystem(server, request.getfixturevalue(f"{server.lower()}_database"))
    table = system.new_target()
    system._run(f"INSERT INTO {table} (id, name) VALUES (1, 'before'), (2, 'before')")
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    hit = failpoints.hit
    monkeypatch.setattr(failpoints, "hit", dies_at("jdbc.save_mode_decided", hit))
    with pytest.raises(DriverDied):
        _write(job, job.attempt(), system.sink(table, data_save_mode="DROP_DATA"), spark, 1, dirs[1], "L1", [5])
    return job, dirs, system, table, hit


def _decided_never_carried_out_then_started_over(spark, store, tmp_path, monkeypatch, request, server: str,
                                                 fresh_mode: str):
    """Table T holds 1, 2 from before the run. Pipeline 1's DROP_DATA is decided, its driver dies before the
    DELETE; pipeline 1 is started over (``fresh_mode``) and commits 10, 11. (job, dirs, system, T)"""
    job, dirs, system, table, hit = _run_decision_never_carried_out(spark, store, tmp_path, monkeypatch, request, server)
    monkeypatch.setattr(failpoints, "hit", hit)
    assert system.read(table) == [1, 2]                  # decided in the store, never carried out
    _resumed(store, job, started_over=1)
    fresh = _write(job, _attempt(store, job), system.sink(table, data_save_mode=fresh_mode), spark, 1, dirs[1],
                   "L2", [10, 11], began=2)
    assert not fresh.replayed
    return job, dirs, system, table


@pytest.mark.parametrize("server", ["PostgreSQL", "MariaDB"])
def test_a_late_carried_out_decision_never_takes_a_fresh_starts_rows_after_its_own_drop(
        spark, store, tmp_path, monkeypatch, request, server):
    """The fresh start's DROP_DATA emptied T after the run's decision: nothing of that decision is owed."""
    job, dirs, system, table = _decided_never_carried_out_then_started_over(
        spark, store, tmp_path, monkeypatch, request, server, "DROP_DATA")
    assert system.read(table) == [10, 11]
    _write(job, _attempt(store, job), system.sink(table, data_save_mode="DROP_DATA"), spark, 2, dirs[2], "M1",
               [20])
    assert system.read(table) == [10, 11, 20], "the run's decision, carried out late, took the fresh start's rows"


@pytest.mark.parametrize("server", ["PostgreSQL", "MariaDB"])
def test_a_late_carried_out_decision_over_rows_committed_since_is_refused(
        spark, store, tmp_path, monkeypatch, request, server):
    """The fresh start kept the data (APPEND_DATA): the rows of before the run are still there, with the fresh
    start's; the DELETE owed would take both. Refused, nothing destroyed, the way on named."""
    job, dirs, system, table = _decided_never_carried_out_then_started_over(
        spark, store, tmp_path, monkeypatch, request, server, "APPEND_DATA")
    assert system.read(table) == [1, 2, 10, 11]
    with pytest.raises(PermanentError, match="never carried out") as refused:
        _write(job, _attempt(store, job), system.sink(table, data_save_mode="DROP_DATA"), spark, 2, dirs[2], "M1",
               [20])
    assert "nothing was destroyed" in str(refused.value) and "as a new job" in str(refused.value), refused.value
    assert system.read(table) == [1, 2, 10, 11]


@pytest.mark.parametrize("server", ["PostgreSQL", "MariaDB"])
def test_a_later_decision_only_recorded_never_makes_an_owed_one_needless(
        spark, store, tmp_path, monkeypatch, request, server):
    """Outside review of these fixes, B1: the run's DROP_DATA is decided and its driver dies before the
    DELETE; pipeline 2, started over, decides its own and dies the same way. Pipeline 1 then comes to
    the table: the later decision was never carried out, so the run's is still owed, and the rows of
    before the run go (they stayed, under the job's, when a recorded later decision counted as done)."""
    job, dirs, system, table, hit = _run_decision_never_carried_out(spark, store, tmp_path, monkeypatch, request, server)
    _resumed(store, job, started_over=2)
    with pytest.raises(DriverDied):
        _write(job, _attempt(store, job), system.sink(table, data_save_mode="DROP_DATA"), spark, 2, dirs[2], "M2",
               [20], began=2)
    monkeypatch.setattr(failpoints, "hit", hit)
    assert system.read(table) == [1, 2]                  # both decided in the store, neither carried out
    _write(job, _attempt(store, job), system.sink(table, data_save_mode="DROP_DATA"), spark, 1, dirs[1], "L1", [10])
    assert system.read(table) == [10], "the run's DROP_DATA was skipped for a later decision never carried out"


@pytest.mark.parametrize("began_a_batch", [False, True], ids=["never-began", "began-a-batch"])
@pytest.mark.parametrize("kind", ["PostgreSQL", "LocalFile"])
def test_a_pipeline_started_over_that_never_wrote_follows_the_runs_decision(
        spark, store, tmp_path, request, kind, began_a_batch):
    """Pipeline 1 (DROP_DATA) empties T and commits 10, 11; pipeline 2 never began a batch (its driver died
    first), is started over, and writes 20 with DROP_DATA: it follows the run's decision, carried out, and
    appends. One that began a batch in its first lineage may have committed into T: its DROP_DATA is refused
    as before (it would destroy pipeline 1's rows, which nothing writes again). Jdbc asks before its plan
    (``may_destroy``), LocalFile when its plan is decided (``decide_once``)."""
    if kind == "PostgreSQL":
        system = JdbcSystem(kind, request.getfixturevalue("postgresql_database"))
        table = system.new_target()
        system._run(f"INSERT INTO {table} (id, name) VALUES (1, 'before')")
    else:
        system = LocalFileSystem(str(tmp_path / "files"))
        table = system.new_target()
        system.put(table, [1])
    job, dirs = _job(store, str(tmp_path / "checkpoints"))
    _write(job, _attempt(store, job), system.sink(table, data_save_mode="DROP_DATA"), spark, 1, dirs[1], "L1", [10, 11])
    assert system.read(table) == [10, 11]
    if began_a_batch:
        with store.write() as conn:
            conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == job.job_id, s.pipelines.c.pipeline_id == 2)
                         .values(started_batch=0, started_lineage="M1"))
    _resumed(store, job, started_over=2)
    second = system.sink(table, data_save_mode="DROP_DATA")
    if began_a_batch:
        with pytest.raises(PermanentError, match="nothing was destroyed"):
            _write(job, _attempt(store, job), second, spark, 2, dirs[2], "M2", [20], began=2)
        assert system.read(table) == [10, 11]
        return
    assert not _write(job, _attempt(store, job), second, spark, 2, dirs[2], "M2", [20], began=2).replayed
    assert system.read(table) == [10, 11, 20]


@pytest.mark.parametrize("server", ["PostgreSQL", "MariaDB"])
def test_a_standing_decision_of_the_same_fresh_start_is_no_license_over_rows_kept_since(
        spark, store, tmp_path, monkeypatch, request, server):
    """Outside review of G's fix, F2: pipelines 2 and 3 are started over by one fresh start, both DROP_DATA
    on T; pipeline 1 carries on. Pipeline 2 DELETEs, its check passes and records the decision, and its driver
    dies before the COMMIT (the DELETE rolls back). Pipeline 1 then commits 10. Pipeline 3 comes: the
    standing decision equals its own plan, and its check took that for a pass: its DELETE took 10. It must
    be refused (pipeline 1 keeps 10), nothing destroyed."""
    system = JdbcSystem(server, request.getfixturevalue(f"{server.lower()}_database"))
    table = system.new_target()
    system._run(f"INSERT INTO {table} (id, name) VALUES (1, 'before')")
    job, dirs = _job(store, str(tmp_path / "checkpoints"), pipelines=3)
    _resumed(store, job, 2, 3)
    hit = failpoints.hit
    reporter, meanwhile = _attempt(store, job), []

    def at(name: str, *args, **kwargs):
        if name == "sink.save_mode_plan" and not meanwhile:       # pipeline 3 passed its door's look-ups
            meanwhile.append(name)
            with pytest.raises(DriverDied):
                _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 2, dirs[2], "M2",
                       [20], began=2)
            assert system.read(table) == [1]             # decided in the store, its DELETE rolled back
            _write(job, reporter, system.sink(table, data_save_mode="APPEND_DATA"), spark, 1, dirs[1], "L1", [10])
            assert system.read(table) == [1, 10]
        elif name == "jdbc.save_mode_decided" and len(meanwhile) == 1:
            meanwhile.append(name)                      # pipeline 2's driver dies before its COMMIT
            raise DriverDied(name)
        return hit(name, *args, **kwargs)

    monkeypatch.setattr(failpoints, "hit", at)
    with pytest.raises(PermanentError, match="nothing was destroyed"):
        _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 3, dirs[3], "N2", [30], began=2)
    assert len(meanwhile) == 2, meanwhile
    assert 10 in system.read(table), "the fresh start's DROP_DATA took the rows pipeline 1 keeps"


@pytest.mark.parametrize("server", ["PostgreSQL"])
def test_a_plan_refused_by_its_own_check_records_nothing_a_writer_with_rows_would_follow(
        spark, store, tmp_path, monkeypatch, request, server):
    """Outside review of G's fix, F3: run 1: pipeline 3's DROP_DATA empties T and it commits 30; pipelines
    1 and 2 never begin a batch. Pipelines 2 and 3 are started over (DROP_DATA). Pipeline 2's DELETE
    runs while pipeline 1 (carrying on) commits 10: its check finds rows kept and pipeline 2 follows the
    run's decision. It recorded "destroy nothing" for the fresh start too, so pipeline 3, which has rows
    of its own there (30), followed that and wrote them again. It must be refused (pipeline 1 keeps 10)."""
    system = JdbcSystem(server, request.getfixturevalue(f"{server.lower()}_database"))
    table = system.new_target()
    job, dirs = _job(store, str(tmp_path / "checkpoints"), pipelines=3)
    reporter = _attempt(store, job)
    _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 3, dirs[3], "N1", [30])
    with store.write() as conn:          # pipeline 3 began (and committed) a batch in its first lineage
        conn.execute(update(s.pipelines).where(s.pipelines.c.job_id == job.job_id, s.pipelines.c.pipeline_id == 3)
                     .values(started_batch=0, started_lineage="N1"))
    _resumed(store, job, 2, 3)
    # the fresh start's driver moved pipeline 3's directory aside: a new lineage, none of its marks yet
    write_json_atomic(os.path.join(dirs[3], "seatide.json"), {"lineage": "N2", "fingerprint": "f"})
    reporter, hit, meanwhile = _attempt(store, job), failpoints.hit, []

    def at(name: str, *args, **kwargs):
        if name == "sink.save_mode_plan" and not meanwhile:       # pipeline 2 passed its door's look-ups
            meanwhile.append(name)
            _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 1, dirs[1], "L1", [10])
        return hit(name, *args, **kwargs)

    monkeypatch.setattr(failpoints, "hit", at)
    _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 2, dirs[2], "M2", [20], began=2)
    monkeypatch.setattr(failpoints, "hit", hit)
    assert meanwhile and 10 in system.read(table)
    with pytest.raises(PermanentError, match="nothing was destroyed"):
        _write(job, reporter, system.sink(table, data_save_mode="DROP_DATA"), spark, 3, dirs[3], "N2", [30], began=2)
