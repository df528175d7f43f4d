"""The deterministic simulation: a fixed budget CI runs, proof that it catches a broken
fence (and replays that seed exactly), and the CLI's last line."""

from __future__ import annotations

import logging
import random
import re
import tempfile

import pytest
from sqlalchemy import and_, select

from seatide.store import schema as s
from seatide.testing import simulate
from seatide.testing import stalls
from seatide.testing.stalls import Stall
from seatide.testing.world import World

# CI's budget is time, not a count: seeds of CI_LONG_STEPS fault steps each from CI_FIRST_SEED on,
# for CI_SECONDS (states such as a forgotten job's id submitted again take thousands of steps to
# reach; 300 never did). The soak runs 100 seeds of 20,000 (docs/operations.md, "Simulation").
CI_SECONDS = 20.0
CI_FIRST_SEED = 1
CI_LONG_STEPS = 3000
CI_SEEDS = (1, 2, 3)
CI_STEPS = 300
BUG_SEED = 7           # a seed whose run a skipped attempt fence breaks (found by trying 1..29 with the store-restart fault)


@pytest.fixture(autouse=True)
def _quiet():
    """Quiet for these tests alone: a later test in the same process logs through "seatide.*"."""
    logger = logging.getLogger("seatide")
    level = logger.level
    simulate.quiet_logs()
    yield
    logger.setLevel(level)


def test_a_resume_from_a_savepoint_that_a_finished_pipeline_is_not_in_keeps_it_finished():
    """Seed 24: a pipeline finished, a savepoint of the other one followed, and a resume from
    that savepoint sent the finished pipeline to a savepoint directory it never had."""
    run = simulate.run_once(24, 400)
    assert run.violations == [], "\n".join([*run.violations, *run.trace[-40:]])


def test_control_plane_keeps_its_invariants_under_seeded_faults_for_twenty_seconds():
    runs = simulate.run_for(CI_FIRST_SEED, CI_LONG_STEPS, CI_SECONDS)
    last = runs[-1]
    assert last.violations == [], (f"seed {last.seed} (replay: python -m seatide.testing.simulate --seed "
                                   f"{last.seed} --steps {CI_LONG_STEPS}):\n"
                                   + "\n".join([*last.violations, *last.trace[-40:]]))
    assert all(len(run.actions) == CI_LONG_STEPS for run in runs)
    print(f"simulation: seeds {CI_FIRST_SEED}..{last.seed}, {CI_LONG_STEPS} fault steps each, no violation")


def test_a_skipped_attempt_fence_is_caught_and_its_seed_replays_identically():
    first = simulate.run_once(BUG_SEED, CI_STEPS, bug="skip-attempt-fence")
    assert first.violations, "a driver whose attempt was replaced must not be able to write"
    assert any("accepted though" in v or "decided" in v or "published" in v for v in first.violations), first.violations
    again = simulate.run_once(BUG_SEED, CI_STEPS, bug="skip-attempt-fence")
    assert (again.actions, again.trace, again.violations) == (first.actions, first.trace, first.violations)
    replayed = simulate.run_once(BUG_SEED, CI_STEPS, actions=first.actions, bug="skip-attempt-fence")
    assert replayed.violations == first.violations
    # the switch is undone after the run: the same seed is clean without the bug
    assert simulate.run_once(BUG_SEED, CI_STEPS).violations == []


def test_cli_last_line_says_seed_steps_runs_and_violations(capsys):
    code = simulate.main(["--seed", "7", "--steps", "60", "--runs", "2"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "simulate: seed=7 steps=60 runs=2 violations=0"
    assert code == 0


def test_cli_exits_non_zero_when_an_invariant_breaks(capsys):
    code = simulate.main(["--seed", str(BUG_SEED), "--steps", str(CI_STEPS), "--inject-bug", "skip-attempt-fence",
                          "--shrink-seconds", "0"])
    out = capsys.readouterr().out
    assert code == 1
    assert re.search(rf"^simulate: seed={BUG_SEED} steps=300 runs=1 violations=[1-9]\d*$",
                     out.strip().splitlines()[-1])
    assert f"trace of seed {BUG_SEED}" in out and f"replay: --seed {BUG_SEED} --steps 300" in out


def test_cli_refuses_a_budget_below_one(capsys):
    with pytest.raises(SystemExit) as exit_info:
        simulate.main(["--seed", "1", "--steps", "0"])
    assert exit_info.value.code == 2
    assert "--steps and --runs must be at least 1" in capsys.readouterr().err


def test_resume_of_a_job_whose_pipelines_all_finished_is_refused():
    # Seed 136 found it: a savepoint asked as the data ran out ends SAVEPOINT_DONE with every
    # pipeline FINISHED; resuming it made an incarnation with nothing to run that could never
    # end (CREATED -> FINISHED is no transition). Such a resume is now refused.
    run = simulate.run_once(136, CI_STEPS)
    assert run.violations == [], "\n".join(run.violations)
    assert any("resume batch-a: resume refused (CONFLICT)" in line for line in run.trace)


def test_history_stamped_by_a_leader_clock_running_ahead_still_expires_before_the_end():
    # Seed 2 (400 steps, before liveness locks changed its draws) found it: a leader whose clock
    # had jumped 31 s ahead cancelled two jobs, so their history expired 31 s later by the true
    # clock, after the quiet phase had stopped waiting. The control plane is right (a deadline
    # stamped by a clock running ahead comes due late by as much, then expires); the quiet
    # phase must wait out the largest skew any process ran with.
    ahead = 45.0                    # more than the quiet phase's margin past HISTORY_EXPIRE_S
    jumps = [("jump", name, ahead, 0.01) for name in ("c0", "c1", "c2")]
    ticks = [("advance", name, 0.0, 0.05) for _ in range(40) for name in ("c0", "c1", "c2")]
    run = simulate.run_once(0, len(jumps) + 1 + len(ticks),
                            actions=[*jumps, ("cancel", "batch-a", 0.9, 0.01), *ticks])
    assert any("cancel batch-a: cancel accepted" in line for line in run.trace)
    assert run.settled
    assert run.violations == [], "\n".join(run.violations)


def _stalled_leader_shape(bug: str | None) -> list[str]:
    """Issue 30 finding 5's shape, driven step by step: the leader stalls just before the cleanup of
    a FINISHED job, the next leader cleans the run up, expires and forgets it, the id is submitted
    again (incarnation 1 once more) and its driver makes its pipeline directories; then the
    stalled leader wakes and takes its step."""
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="seatide-sim-") as data_dir, simulate.injected(bug):
        world = World(data_dir)
        try:
            def until(what, condition, rounds=2000):
                for _ in range(rounds):
                    if condition():
                        return
                    world.round(rng, 0.25)
                    world.check.after_step()
                raise AssertionError(f"the world never reached: {what}")

            def dirty():
                with world.shared.read() as conn:
                    return conn.execute(select(s.job_results).where(and_(
                        s.job_results.c.job_id == "batch-a", s.job_results.c.cleanup == "DIRTY"))).first()

            until("batch-a FINISHED, its cleanup due", lambda: dirty() is not None)
            result = dirty()
            leader = next(p for p in world.procs.values() if p.kind == "coordinator" and p.obj.lease.is_leader)
            leader.stalled, leader.paused = Stall(leader.obj.lease.epoch, result, forgotten=True), True

            def resubmitted():
                if "batch-a" in stalls.stalled_on(world):
                    world.user("submit", "batch-a")
                return stalls.over(world, leader) and any(
                    run != result.run_id for job, run in stalls.live_dirs(world).values() if job == "batch-a")

            until("batch-a forgotten, submitted again and started", resubmitted)
            leader.paused = False
            world.advance(leader, 0.5)
            return list(world.check.violations)
        finally:
            world.close()


def test_a_leader_stalled_across_expiry_forget_and_resubmission_touches_no_other_run():
    assert _stalled_leader_shape(None) == []


def test_the_checker_catches_a_cleanup_that_acts_on_a_stale_row():
    """The cleanup as it was before issue 30 (the row as read, the incarnation compared, the epoch
    checked after the removal) removes the new run's directories."""
    violations = _stalled_leader_shape("skip-run-fence")
    assert any("of run" in v and "removed" in v for v in violations), violations


def test_a_pipeline_whose_sink_hangs_is_seen_while_the_other_pipeline_of_its_job_commits():
    """Issue 30, finding 10, in the simulation: stream-a's driver has one pipeline's sink hang
    while its other pipeline commits on. The leader must judge that pipeline stale and replace
    the attempt, or the job never checkpoints it again: before, the job's newest checkpoint
    (the healthy pipeline's) hid it, and the quiet phase did not converge."""
    names = ("c0", "c1", "c2", "w0", "w1", *(f"d{n}" for n in range(1, 9)))
    # rolls that neither fail a driver's task nor always pick the same pipeline
    ticks = [("advance", name, roll, 0.02) for _ in range(60) for roll in (0.3, 0.8) for name in names]
    hang = ("hang-pipeline", "stream-a", 0.9, 0.01)
    run = simulate.run_once(0, len(ticks) * 2 + 1, actions=[*ticks, hang, *ticks])
    assert any("hang-pipeline stream-a" in line and "sink hangs" in line for line in run.trace), \
        [line for line in run.trace if "hang-pipeline" in line]
    assert run.settled
    assert run.violations == [], "\n".join(run.violations)
