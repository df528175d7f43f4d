"""Deterministic simulation of the control plane.

    python -m seatide.testing.simulate --seed N --steps S [--runs R | --seconds T]

Each run builds a cluster (three coordinators, two workers, BATCH and STREAMING jobs) of
the real control-plane code on a real SQLite store in a temporary directory, with a
simulated clock and process table (``world``). A scheduler seeded with ``random.Random``
picks every step: advance a process (a leader's or follower's tick, one reconcile step,
a worker step, a driver's next report), crash, pause, partition or skew a process,
repeat or delay a report, restart the store's server (every liveness lock lost while its
holder lives), cancel, savepoint, resume (from the latest checkpoints, the newest savepoint
or an older one) or submit a job. Each process has its own clock; the store keeps the true
time, as a PostgreSQL server does, so every stamp and comparison is on the store's clock
while a skewed process's own durations run fast or slow. The invariants
(``invariants``) are checked after every step. Then faults stop, the cluster settles and
must converge; every job is cancelled, cleaned up and expired, and nothing may remain.

A failing seed replays exactly; its trace is shrunk (steps dropped while it still fails,
within a time budget) and printed. The last line is
``simulate: seed=N steps=S runs=R violations=V``; the exit code is 0 only when V is 0.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field

from sqlalchemy import select

from seatide.store import db
from seatide.store import schema as s
from seatide.testing import stalls
from seatide.testing.world import HISTORY_EXPIRE_S, JOB_IDS, World, quiet_logs

SETTLE_MAX_S = 240.0
SETTLE_DT = 0.25
# restart-store: the store's server restarts (every session and liveness lock lost; processes live);
# hang-pipeline: one pipeline of a driver stops committing (its sink hangs) while the others go on
FAULTS = ("crash", "pause", "partition", "skew", "jump", "restart-store", "hang-pipeline")
RECOVERIES = {"restart": "crashed", "unpause": "paused", "heal": "partitioned"}
BUGS = ("skip-attempt-fence", "skip-run-fence")
# A run's store and files live in memory when the machine has a tmpfs: nothing of a simulated
# world outlives its run, so the fsyncs of its commit files and store only cost time.
RUN_DIR = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@dataclass
class Run:
    seed: int
    actions: list[tuple] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    settled: bool = False        # reached the quiet phase (no violation among the fault steps)


def choose(world: World, rng: random.Random) -> tuple:
    """The next action, drawn from the seed and the world as it is now."""
    dt = round(rng.uniform(0.0, 0.12), 4)
    names = list(world.procs)
    r = rng.random()
    if r < 0.72:
        runnable = [n for n in names if world.procs[n].runnable]
        return ("advance", rng.choice(runnable) if runnable else names[0], rng.random(), dt)
    if r < 0.80:
        kind = rng.choice(FAULTS)
        value = rng.uniform(-6.0, 6.0) if kind == "skew" else rng.uniform(0.0, 15.0)
        if kind == "hang-pipeline":          # a job's: its current driver's, whichever that is
            return (kind, rng.choice(JOB_IDS), round(rng.random(), 3), dt)
        return (kind, rng.choice(names), round(value, 3), dt)
    if r < 0.88:
        kind = rng.choice(sorted(RECOVERIES))
        hurt = [n for n in names if _hurt(world, n, RECOVERIES[kind])]
        return (kind, rng.choice(hurt) if hurt else names[0], 0.0, dt)
    if r < 0.94:
        drivers = [n for n in names if world.procs[n].kind == "driver"] or names
        return (rng.choice(("duplicate", "delay", "deliver")), rng.choice(drivers), rng.random(), dt)
    kind, job_id = rng.choice(("cancel", "savepoint", "resume", "submit")), rng.choice(JOB_IDS)
    waiting = stalls.stalled_on(world)
    if kind == "submit" and waiting:      # a stalled leader waits for its job id's next run
        job_id = waiting[int(dt * 10_000) % len(waiting)]
    return (kind, job_id, rng.random(), dt)


def _hurt(world: World, name: str, how: str) -> bool:
    proc = world.procs[name]
    return proc.store.partitioned if how == "partitioned" else getattr(proc, how)


@contextlib.contextmanager
def injected(bug: str | None):
    """A deliberately broken control plane, to prove the invariants catch it (tests only)."""
    if bug is None:
        yield
        return
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; one of {', '.join(BUGS)}")
    with contextlib.ExitStack() as undo:
        if bug == "skip-attempt-fence":
            _patch(undo, db, "check_attempt_current", lambda *args, **kwargs: None)
        else:      # cleanup as it was before issue 30: the row as read, the epoch checked only after
            from seatide.coordinator import cleanup, door

            @contextlib.contextmanager
            def checked_after(store, epoch, decided, fence, check=True):
                with store.write() as conn:
                    job = conn.execute(select(s.jobs).where(s.jobs.c.job_id == decided.job_id)).first()
                    yield door.Opened(conn, job, fence(conn, job, decided))
                    if check and conn.execute(select(s.leadership.c.epoch)).scalar() != epoch:
                        raise db.NotLeader(f"epoch {epoch} is no longer the leader")

            _patch(undo, cleanup, "fenced_read", functools.partial(checked_after, check=False))
            _patch(undo, cleanup, "destructive_step", checked_after)
            _patch(undo, cleanup, "_fence", lambda result: lambda conn, job, decided: result)
            _patch(undo, cleanup, "current_run", lambda job, decided: job is not None and
                   job.incarnation == decided.incarnation)
            _patch(undo, cleanup, "owned_paths", lambda decided, paths: paths)
        yield


def _patch(undo: contextlib.ExitStack, module, name: str, value) -> None:
    real = getattr(module, name)
    setattr(module, name, value)
    undo.callback(setattr, module, name, real)


def run_once(seed: int, steps: int, actions: list[tuple] | None = None, bug: str | None = None,
             split_commit: bool = False, settle: bool = True) -> Run:
    """One run: ``steps`` drawn from ``seed`` (or the given ``actions``), then settle and expire."""
    run = Run(seed)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="seatide-sim-", dir=RUN_DIR) as data_dir, injected(bug):
        world = World(data_dir, split_commit=split_commit)
        try:
            planned = actions if actions is not None else [None] * steps
            for number, action in enumerate(planned):
                action = action or choose(world, rng)
                run.actions.append(action)
                outcome = world.apply(action)
                run.trace.append(f"{number:5d} t+{world.t - 1_000_000.0:7.2f} {_show(action)}: {outcome}")
                world.check.after_step()
                world.check.published_once(world.ledger.published)
                if world.check.violations:
                    break
            if not world.check.violations and settle:
                run.settled = True
                _settle_and_expire(world, run)
        finally:
            run.violations = list(world.check.violations)
            world.close()
    return run


def run_for(first_seed: int, steps: int, seconds: float) -> list[Run]:
    """Seeds ``first_seed``, ``first_seed + 1``, ... of ``steps`` fault steps each, until ``seconds``
    have passed (at least one run): how CI spends a time budget rather than a count. Each run
    replays exactly from its seed; which seeds fit depends on the machine."""
    runs, deadline = [], time.monotonic() + seconds
    seed = first_seed
    while not runs or time.monotonic() < deadline:
        runs.append(run_once(seed, steps))
        if runs[-1].violations:
            break
        seed += 1
    return runs


def _show(action: tuple) -> str:
    kind, target, value, _ = action
    return f"{kind} {target}" + (f" {value:+.2f}" if kind in ("skew", "jump") else "")


def _settle_and_expire(world: World, run: Run) -> None:
    rng = random.Random(0)
    world.quiet()
    run.trace.append("----- faults stop: settle -----")
    problems = _settle(world, rng, lambda: world.check.converged(world.t))
    if world.check.violations:      # found while settling; what did not converge follows from it
        return
    for problem in problems:
        world.check.fail(f"did not converge once faults stopped: {problem}")
    if world.check.violations:
        return
    for job_id in JOB_IDS:
        world.user("cancel", job_id)
    problems = _settle(world, rng, lambda: [p for p in world.check.converged(world.t) if "RUNNING" in p or
                                             "still" in p])
    if world.check.violations:
        return
    for problem in problems:
        world.check.fail(f"did not end after a cancel: {problem}")
    # Deadlines stamped during the faults by a clock running ahead come due late by as much
    # (seed 2 at 400 steps: a leader 31 s ahead cancelled two jobs); wait that out too, so a
    # history that never expires is still caught but a late one is not mistaken for it.
    until = world.t + HISTORY_EXPIRE_S + world.most_ahead + 10.0
    while world.t < until:
        world.round(rng, 0.5)
        world.check.after_step()
    world.check.nothing_left(sorted(set(world.submitted)), world.data_dir)


def _settle(world: World, rng: random.Random, problems) -> list[str]:
    deadline = world.t + SETTLE_MAX_S
    while True:
        for _ in range(20):
            world.round(rng, SETTLE_DT)
            world.check.after_step()
            world.check.published_once(world.ledger.published)
        left = problems()
        if not left or world.t >= deadline or world.check.violations:
            return left


def shrink(run: Run, steps: int, budget_s: float, bug: str | None, split_commit: bool) -> Run:
    """Drop chunks of the failing steps while the run still fails, within ``budget_s``.

    A violation among the fault steps is looked for there only: trials skip the quiet phase."""
    best = run
    settle = run.settled
    deadline = time.monotonic() + budget_s
    chunk = max(1, len(best.actions) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        start, progressed = 0, False
        while start < len(best.actions) and time.monotonic() < deadline:
            candidate = best.actions[:start] + best.actions[start + chunk:]
            trial = run_once(run.seed, steps, candidate, bug, split_commit, settle)
            if trial.violations:
                best, progressed = trial, True
            else:
                start += chunk
        if not progressed:
            chunk //= 2
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seatide.testing.simulate",
                                     description="Deterministic simulation of the SeaTide control plane.")
    parser.add_argument("--seed", type=int, required=True, help="first seed; run i uses seed + i")
    parser.add_argument("--steps", type=int, required=True, help="fault-phase steps per run")
    parser.add_argument("--runs", type=int, default=1, help="how many seeds to run (default 1)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="run seeds from --seed on until this many seconds have passed (instead of --runs)")
    parser.add_argument("--shrink-seconds", type=float, default=60.0,
                        help="time to spend shrinking a failing trace (default 60; 0: print it whole)")
    parser.add_argument("--split-commit", action="store_true",
                        help="let other processes run between a driver's sink decision and its publish "
                             "(as real threads and processes may; issue 9 item 1)")
    parser.add_argument("--inject-bug", choices=BUGS, help="break the control plane on purpose (tests)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.runs < 1:
        parser.error("--steps and --runs must be at least 1")
    quiet_logs()
    violations, began, runs = 0, time.monotonic(), 0
    deadline = began + args.seconds if args.seconds is not None else None
    seed = args.seed
    while (runs < args.runs) if deadline is None else (runs == 0 or time.monotonic() < deadline):
        run = run_once(seed, args.steps, bug=args.inject_bug, split_commit=args.split_commit)
        runs, seed = runs + 1, seed + 1
        if not run.violations:
            continue
        violations += len(run.violations)
        _report(run, args)
    minutes = (time.monotonic() - began) / 60
    print(f"# {runs} runs in {minutes * 60:.1f} s: {runs / max(minutes, 1e-9):.1f} runs per minute",
          file=sys.stderr)
    print(f"simulate: seed={args.seed} steps={args.steps} runs={runs} violations={violations}")
    return 0 if violations == 0 else 1


def _report(run: Run, args) -> None:
    print(f"seed {run.seed}: {len(run.violations)} violation(s):")
    for violation in run.violations:
        print(f"  - {violation}")
    shrunk = shrink(run, args.steps, args.shrink_seconds, args.inject_bug, args.split_commit) \
        if args.shrink_seconds > 0 else run
    print(f"trace of seed {run.seed} ({len(shrunk.actions)} of {len(run.actions)} fault steps kept; "
          f"replay: --seed {run.seed} --steps {args.steps}):")
    for line in shrunk.trace:
        print("  " + line)
    print(f"  => {shrunk.violations[0]}")


if __name__ == "__main__":
    sys.exit(main())
