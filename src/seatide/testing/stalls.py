"""The simulation's stalled leader (issue 30, finding 5): a leader reads a job's due result,
then stalls just before acting on it, across the run's cleanup, expiry, forget and a
resubmission of the same job id; woken, it takes the step with what it read.

A pause of the leader while a cleanup or expiry is due becomes such a stall (``stall``); it
lasts until the job id has a new run (``over``), which the scheduler submits (``stalled_on``).
The check: no step touches a run other than the one it was decided for, neither a driver
(``attempt_runs``: the run each attempt was started for) nor a pipeline directory of a job
id's current run (``live_dirs``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from seatide.coordinator.cleanup import due_results, reconcile_cleanup
from seatide.store import schema as s
from seatide.store.db import NotLeader
from seatide.testing.processes import StorePartitioned


@dataclass
class Stall:
    """A leader read a job's due result, then stalled before acting on it, until the result's run
    was cleaned up, (``forgotten``: expired and forgotten,) and its job id submitted again."""
    epoch: int
    result: Any
    forgotten: bool


def stall(world, proc, roll: float) -> str | None:
    """A pause of the leader while a cleanup or expiry is due becomes a stall just before
    that step, which lasts until the job id has a new run."""
    coordinator = proc.obj
    if proc.kind != "coordinator" or proc.crashed or not coordinator.lease.is_leader:
        return None
    try:      # any result it may read as it comes due (a cleanup's delay, an expiry's)
        due = due_results(proc.store, world.t + 3600.0)
    except StorePartitioned:
        return None
    if not due:
        return None
    result = due[int(roll * 1000) % len(due)]
    proc.stalled = Stall(coordinator.lease.epoch, result, forgotten=int(roll * 1000) % 2 == 0)
    proc.paused, proc.reconciling = True, None
    return (f"stalled before the {result.cleanup} step of job {result.job_id} (run {result.run_id}), "
            f"until {'its rows are forgotten and ' if proc.stalled.forgotten else ''}its id is submitted again")


def stalled_on(world) -> list[str]:
    """Job ids a stalled leader waits to see submitted again (the scheduler submits them): once
    the run is cleaned up, or once its rows are forgotten, so the new run is incarnation 1."""
    return sorted({p.stalled.result.job_id for p in world.procs.values()
                   if p.stalled is not None and _run_now(world, p.stalled.result.job_id) ==
                   (None if p.stalled.forgotten else p.stalled.result.run_id)})


def over(world, proc) -> bool:
    return _run_now(world, proc.stalled.result.job_id) not in (None, proc.stalled.result.run_id)


def _run_now(world, job_id: str) -> str | None:
    with world.shared.read() as conn:
        return conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == job_id)).scalar()


def stalled_step(world, proc) -> str:
    """The stalled leader wakes and takes the step it had decided on, with what it read then.
    No step may touch a run other than the one it was decided for: the new run's pipeline
    directories and drivers stay."""
    stall, proc.stalled = proc.stalled, None
    result = stall.result
    live = live_dirs(world)

    def kill(attempt) -> None:
        run = world.attempt_runs.get(attempt.attempt_id)
        if run != result.run_id:
            world.check.fail(f"a cleanup step decided for run {result.run_id} of job {result.job_id} put down "
                            f"attempt {attempt.attempt_id} of run {run}")
        driver = world.procs.get(f"d{attempt.attempt_id}")
        if driver is not None:
            driver.obj.proc.kill()

    try:
        reconcile_cleanup(proc.store, stall.epoch, f"coordinator:{proc.name}", result, kill)
        outcome = "the stale step returned"
    except (NotLeader, StorePartitioned) as exc:
        outcome = f"the stale step refused: {type(exc).__name__}"
    for path, (job_id, run) in live.items():
        if run != result.run_id and not os.path.isdir(path):
            world.check.fail(f"a cleanup step decided for run {result.run_id} of job {result.job_id} removed "
                            f"{path}, of run {run} of job {job_id}")
    return outcome


def live_dirs(world) -> dict[str, tuple[str, str]]:
    """Every pipeline directory on disk of a job id's current run."""
    with world.shared.read() as conn:
        rows = conn.execute(select(s.pipelines.c.checkpoint_dir, s.jobs.c.job_id, s.jobs.c.run_id).where(
            s.of_current_incarnation(s.pipelines))).all()
    return {row.checkpoint_dir: (row.job_id, row.run_id) for row in rows if os.path.isdir(row.checkpoint_dir)}
