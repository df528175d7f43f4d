"""reconcile_job decisions, as a pure function of stored state."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from seatide.coordinator import reconcile as r
from seatide.store.states import IllegalTransition, check_job, final_job_status
from seatide.store.migrations import HEAD
from seatide.store.node_features import FEATURES

NOW = 1_000_000.0
T = r.Timeouts(driver_hung_after=10, worker_lost_after=10, launch=60, cancel_grace=30)


def job(**kw):
    base = dict(job_id="j", incarnation=1, status="RUNNING", desired="RUN", retries_used=0, max_retries=3,
                retry_interval_s=3.0, next_attempt_at=None, current_attempt=7, pinned_worker=None,
                updated_at=NOW - 1, stale_after_s=None, on_stale="restart", stale_since=None,
                progress_timeout_s=None, on_hung="restart", hung_since=None)
    return SimpleNamespace(**{**base, **kw})


def attempt(**kw):
    base = dict(attempt_id=7, worker_id="w1", state="RUNNING", pid=42, created_at=NOW - 20, launched_at=NOW - 20,
                heartbeat_at=NOW - 1, ended_at=None, error=None, kill_requested=False, progress_at=None,
                tasks_done=None)
    return SimpleNamespace(**{**base, **kw})


def worker(node_id="w1", beat=NOW - 1, slots=2, stopped=False, features=FEATURES):
    return SimpleNamespace(node_id=node_id, heartbeat_at=beat, slots=slots, stopped=stopped, host="h",
                           features=features)


def pipe(pid=1, status="RUNNING", error=None, idle=False, started_at=NOW - 60, last_checkpoint_at=None,
         progress_at=None, waiting=None):
    return SimpleNamespace(pipeline_id=pid, status=status, error=error, idle=idle, started_at=started_at,
                           last_checkpoint_at=last_checkpoint_at, progress_at=progress_at, waiting=waiting)


def decide(j, a, pipes, workers=None, load=None, last_checkpoint_at=None, dead=(), observed_since=0.0,
           store_revision=HEAD):
    """``dead``: workers dead by their lock, its lock first seen free at NOW (or {worker: when}).
    ``last_checkpoint_at``: every pipeline's newest checkpoint (a pipeline that says none)."""
    workers = {w.node_id: w for w in (workers if workers is not None else [worker()])}
    dead = dead if isinstance(dead, dict) else dict.fromkeys(dead, NOW)
    for p in pipes:
        if p.last_checkpoint_at is None:
            p.last_checkpoint_at = last_checkpoint_at
    return r.reconcile_job(r.Snapshot(j, a, pipes, workers, load or {}, NOW, last_checkpoint_at,
                                      dead, observed_since=observed_since, store_revision=store_revision), T)


def test_terminal_job_is_left_alone():
    assert decide(job(status="FINISHED"), attempt(state="SUCCEEDED", ended_at=NOW), [pipe(status="FINISHED")]) == []


def test_job_finishes_when_every_pipeline_has_ended():
    actions = decide(job(), attempt(), [pipe(1, "FINISHED"), pipe(2, "FINISHED")])
    assert actions == [r.Finish("FINISHED", None)]


def test_failed_pipeline_fails_the_job_with_its_error():
    actions = decide(job(), attempt(), [pipe(1, "FINISHED"), pipe(2, "FAILED", "Assert failed")])
    assert actions == [r.Finish("FAILED", "Assert failed")]


def test_unfinished_pipelines_keep_the_job_running():
    assert decide(job(), attempt(), [pipe(1, "FINISHED"), pipe(2, "RUNNING")]) == []


def test_silent_driver_is_declared_lost():
    actions = decide(job(), attempt(heartbeat_at=NOW - 11), [pipe()])
    assert len(actions) == 1 and isinstance(actions[0], r.MarkAttemptLost) and "hung" in actions[0].reason


def test_lost_worker_loses_its_attempt():
    actions = decide(job(), attempt(), [pipe()], workers=[worker(beat=NOW - 11)])
    assert isinstance(actions[0], r.MarkAttemptLost) and "worker w1 lost" in actions[0].reason


def test_no_new_attempt_while_the_old_driver_may_still_run():
    # Lost, but its worker is alive and has not reaped the process yet.
    assert decide(job(), attempt(state="LOST", ended_at=None), [pipe()]) == []


def test_a_cut_off_hosts_driver_is_not_replaced_before_it_has_fenced_itself():
    # Its worker is lost, but the driver heartbeated 4 s ago: it may still run until it
    # notices (self-fence 6 s + heartbeat 1 s + margin), so no new attempt yet.
    lost_host = [worker(beat=NOW - 11)]
    lost = attempt(state="LOST", heartbeat_at=NOW - 4, error="worker w1 lost")
    assert decide(job(), lost, [pipe()], workers=lost_host) == []
    lost.heartbeat_at = NOW - T.driver_stops_within - 0.1
    # Its worker is gone, which is not the job's failure: no retry interval.
    assert decide(job(), lost, [pipe()], workers=lost_host) == [r.ScheduleRetry(NOW, "worker w1 lost")]


def test_a_dead_worker_loses_its_attempt_at_once_though_its_heartbeat_is_fresh():
    actions = decide(job(), attempt(), [pipe()], dead={"w1"})
    assert len(actions) == 1 and isinstance(actions[0], r.MarkAttemptLost)
    assert "worker w1 lost: it died (its liveness lock was released)" == actions[0].reason
    assert decide(job(), attempt(), [pipe()], dead={"w2"}) == []      # another worker's death


def test_a_dead_workers_attempt_is_retried_without_waiting_for_its_driver_to_fence_itself():
    # Its driver heartbeated a moment ago, but it died with its worker (PR_SET_PDEATHSIG).
    lost = attempt(state="LOST", heartbeat_at=NOW - 0.5, error="worker w1 lost: it died")
    assert decide(job(), lost, [pipe()], dead={"w1"}) == [r.ScheduleRetry(NOW, "worker w1 lost: it died")]
    assert decide(job(), lost, [pipe()]) == []     # by heartbeats alone it must still wait


def test_a_dead_worker_gets_no_new_attempt():
    pending = job(status="PENDING", current_attempt=None, next_attempt_at=NOW - 1)
    assert decide(pending, None, [], workers=[worker("w1"), worker("w2")], dead={"w1"}) == [r.CreateAttempt("w2")]
    assert decide(pending, None, [], workers=[worker("w1")], dead={"w1"}) == []


def test_the_retry_interval_applies_to_the_jobs_own_failures_not_to_a_lost_worker():
    failed = attempt(state="FAILED", ended_at=NOW - 1, error="boom")
    assert decide(job(), failed, [pipe()]) == [r.ScheduleRetry(NOW + 3.0, "boom")]
    # The same failure after its worker died, or stopped: the job moves on at once.
    assert decide(job(), failed, [pipe()], dead={"w1"}) == [r.ScheduleRetry(NOW, "boom")]
    assert decide(job(), failed, [pipe()], workers=[worker(stopped=True)]) == [r.ScheduleRetry(NOW, "boom")]
    # It still counts: out of retries is out of retries.
    out = decide(job(retries_used=3), failed, [pipe()], dead={"w1"})
    assert out[-1] == r.Finish("FAILED", "failed after 3 retries: boom")


def test_retry_after_the_old_driver_is_gone():
    actions = decide(job(), attempt(state="LOST", ended_at=NOW - 1, error="driver hung"), [pipe()])
    assert actions == [r.ScheduleRetry(NOW + 3.0, "driver hung")]


def test_out_of_retries_fails_the_job_with_the_cause():
    actions = decide(job(retries_used=3), attempt(state="FAILED", ended_at=NOW, error="boom"), [pipe()])
    assert isinstance(actions[-1], r.Finish) and actions[-1].status == "FAILED" and "boom" in actions[-1].error


def test_zero_retries_fails_at_once():
    actions = decide(job(max_retries=0), attempt(state="LOST", ended_at=NOW, error="worker w1 lost"), [pipe()])
    assert actions[-1] == r.Finish("FAILED", "worker w1 lost")


def test_pending_job_waits_for_its_retry_time_then_gets_a_worker():
    pending = job(status="PENDING", next_attempt_at=NOW + 1)
    assert decide(pending, attempt(state="FAILED", ended_at=NOW - 1), [pipe()]) == []
    pending.next_attempt_at = NOW - 1
    assert decide(pending, attempt(state="FAILED", ended_at=NOW - 1), [pipe()]) == [r.CreateAttempt("w1")]


def test_a_job_goes_only_to_a_worker_whose_code_heads_the_stores_revision():
    """A worker whose SeaTide heads another revision starts drivers that refuse the store (a later one) or that the
    store has moved past (an earlier one: "newer than this SeaTide"): the job would burn its retries (outside
    review of leasemove, H1). Its row says which revision its code heads; the leader reads the store's."""
    new = job(status="PENDING", current_attempt=None)
    earlier, later = f"recorded-environment,store-{int(HEAD) - 1:04d}", f"recorded-environment,store-{int(HEAD) + 1:04d}"
    workers = [worker("w0", features="recorded-environment"), worker("w1", features=earlier),
               worker("w2", features=later)]
    assert decide(new, None, [pipe(status="CREATED")], workers) == []
    assert decide(new, None, [pipe(status="CREATED")], workers, store_revision=f"{int(HEAD) + 1:04d}") == [
        r.CreateAttempt("w2")]
    assert decide(new, None, [pipe(status="CREATED")], [*workers, worker("w3")]) == [r.CreateAttempt("w3")]


def test_scheduling_respects_slots_and_pins():
    new = job(status="PENDING", current_attempt=None)
    workers = [worker("w1"), worker("w2", slots=1)]
    assert decide(new, None, [pipe(status="CREATED")], workers, load={"w1": 2}) == [r.CreateAttempt("w2")]
    new.pinned_worker = "w1"
    assert decide(new, None, [pipe(status="CREATED")], workers, load={"w1": 2}) == []


def test_cancel_goes_through_canceling_and_ends_canceled_without_a_driver():
    assert decide(job(desired="CANCEL"), attempt(), [pipe()]) == [r.SetStatus("CANCELING")]
    done = decide(job(status="CANCELING", desired="CANCEL"), attempt(state="SUCCEEDED", ended_at=NOW), [pipe()])
    assert done == [r.EndPipelines("CANCELED"), r.Finish("CANCELED")]


def test_driver_that_ignores_a_cancel_is_put_down():
    actions = decide(job(status="CANCELING", desired="CANCEL", updated_at=NOW - 31), attempt(), [pipe()])
    assert isinstance(actions[0], r.MarkAttemptLost)


def test_final_status_rule():
    assert final_job_status(["FINISHED", "FAILED", "CANCELED"], True) == "FAILED"
    assert final_job_status(["FINISHED", "CANCELED"], True) == "CANCELED"
    assert final_job_status(["SAVEPOINT_DONE", "FINISHED"], True) == "SAVEPOINT_DONE"
    assert final_job_status(["FINISHED"], False) == "FINISHED"


def test_terminal_status_has_no_way_out():
    for terminal in ("FINISHED", "FAILED", "CANCELED", "SAVEPOINT_DONE"):
        for other in ("RUNNING", "PENDING", "CREATED"):
            with pytest.raises(IllegalTransition):
                check_job(terminal, other)


@pytest.mark.parametrize("policy, expected", [
    ("warn", [r.FlagStale]),
    ("restart", [r.FlagStale, r.MarkAttemptLost]),
    ("fail", [r.FlagStale, r.MarkAttemptLost, r.EndPipelines, r.Finish]),
])
def test_stale_checkpoints_apply_the_jobs_policy(policy, expected):
    streaming = job(stale_after_s=30, on_stale=policy)
    actions = decide(streaming, attempt(launched_at=NOW - 100), [pipe()], last_checkpoint_at=NOW - 31)
    assert [type(a) for a in actions] == expected
    if policy == "fail":
        assert actions[-1].status == "FAILED" and "checkpoint stale" in actions[-1].error


def test_idle_stream_or_fresh_checkpoint_is_not_stale():
    streaming = job(stale_after_s=30)
    assert decide(streaming, attempt(launched_at=NOW - 100), [pipe(idle=True)], last_checkpoint_at=NOW - 300) == []
    assert decide(streaming, attempt(launched_at=NOW - 100), [pipe()], last_checkpoint_at=NOW - 29) == []
    # a new attempt gets a full window from when its pipelines started
    assert decide(streaming, attempt(launched_at=NOW - 100), [pipe(started_at=NOW - 10)],
                  last_checkpoint_at=NOW - 300) == []
    assert decide(streaming, attempt(launched_at=NOW - 100), [pipe(started_at=NOW - 200)],
                  last_checkpoint_at=NOW - 300) == []   # pipelines not yet started by this attempt
    # flagged once; the flag clears with the next checkpoint or attempt
    assert decide(job(stale_after_s=30, stale_since=NOW - 5), attempt(launched_at=NOW - 100), [pipe()],
                  last_checkpoint_at=NOW - 300) == []


# -- the progress watchdog: alive but stuck ---------------------------------------------------
def stuck(**kw):
    """A job with a 30 s progress timeout."""
    return job(progress_timeout_s=30.0, **kw)


def driver(**kw):
    """An attempt launched 100 s ago whose driver started its pipelines (first progress) 90 s ago."""
    return attempt(**{"launched_at": NOW - 100, "progress_at": NOW - 90, **kw})


def started(pid=1, ago=90.0, **kw):
    """A pipeline this attempt started ``ago`` seconds ago."""
    return pipe(pid, started_at=NOW - ago, **kw)


@pytest.mark.parametrize("policy, expected", [
    ("warn", [r.FlagHung]),
    ("restart", [r.FlagHung, r.MarkAttemptLost]),
    ("fail", [r.FlagHung, r.MarkAttemptLost, r.EndPipelines, r.Finish]),
])
@pytest.mark.parametrize("mode", ["BATCH", "BATCH with checkpoints", "STREAMING"])
def test_no_batch_and_no_task_progress_flags_the_job_hung_and_applies_its_policy(policy, expected, mode):
    # BATCH without checkpoints never commits until its end; the others committed 40 s ago.
    last_checkpoint = None if mode == "BATCH" else NOW - 40
    actions = decide(stuck(on_hung=policy), driver(progress_at=NOW - 31, tasks_done=12),
                     [started()], last_checkpoint_at=last_checkpoint)
    assert [type(a) for a in actions] == expected
    assert actions[0] == r.FlagHung(31.0, policy)
    if policy != "warn":
        assert "hung" in actions[1].reason
    if policy == "fail":
        assert actions[2] == r.EndPipelines("FAILED", actions[1].reason)
        assert actions[-1].status == "FAILED"


def test_the_failure_says_what_hung_and_for_how_long():
    actions = decide(stuck(on_hung="fail"), driver(attempt_id=7, progress_at=NOW - 45, tasks_done=12),
                     [started(1), pipe(2, status="FINISHED")])
    message = actions[-1].error
    assert message.startswith("job hung: pipeline 1 of attempt 7 ")
    assert "for 45 s (12 tasks done by the attempt)" in message
    assert "job.progress-timeout 30 s, on-hung fail" in message


def test_a_completed_task_or_a_committed_batch_is_progress():
    assert decide(stuck(), driver(progress_at=NOW - 29), [started()]) == []
    assert decide(stuck(), driver(progress_at=NOW - 300), [started()],
                  last_checkpoint_at=NOW - 29) == []


def test_the_hang_window_opens_when_the_driver_has_started_its_pipelines():
    # Starting Spark and the queries is not a hang: no progress report yet, no verdict
    # (until the start-up itself has taken too long: the next test).
    assert decide(stuck(), driver(progress_at=None, launched_at=NOW - 55), [started(ago=300)]) == []
    # Pipelines last started by an earlier attempt: this one is still starting up.
    assert decide(stuck(), driver(), [started(ago=200)]) == []
    # Started 20 s ago: 10 s left; 31 s ago: hung.
    assert decide(stuck(), driver(progress_at=NOW - 20), [started(ago=25)]) == []
    assert [type(a) for a in decide(stuck(), driver(progress_at=NOW - 31), [started(ago=35)])] == [
        r.FlagHung, r.MarkAttemptLost]


@pytest.mark.parametrize("policy, expected", [
    ("warn", [r.FlagHung]),
    ("restart", [r.FlagHung, r.MarkAttemptLost]),
    ("fail", [r.FlagHung, r.MarkAttemptLost, r.EndPipelines, r.Finish]),
])
def test_a_driver_stuck_in_its_start_up_while_heartbeating_is_hung_too(policy, expected):
    """Found by the hang at every failpoint: a driver hung after its first heartbeat, its
    heartbeat thread going, held its job forever (the hang window never opened)."""
    limit = r.STARTUP_JUDGED_AFTER_S
    starting = driver(progress_at=None, launched_at=NOW - limit - 1)
    actions = decide(stuck(on_hung=policy), starting, [started(ago=limit + 300)])
    assert [type(a) for a in actions] == expected
    assert actions[0] == r.FlagHung(limit + 1, policy)
    if policy != "warn":
        assert actions[1].reason.startswith(f"job hung: attempt 7 had not started its pipelines {limit + 1:.0f} s after")
    # Never sooner than the start-up bound, however short the progress timeout: a loaded
    # host takes minutes to start Spark and a few queries...
    assert decide(stuck(), driver(progress_at=None, launched_at=NOW - limit + 1), [started(ago=900)]) == []
    # ...nor sooner than the progress timeout when that is longer.
    patient = job(progress_timeout_s=limit * 2)
    assert decide(patient, driver(progress_at=None, launched_at=NOW - limit * 2 + 1), [started(ago=9999)]) == []
    assert decide(patient, driver(progress_at=None, launched_at=NOW - limit * 2 - 1), [started(ago=9999)])[0] == \
        r.FlagHung(limit * 2 + 1, "restart")
    # Without a progress timeout, no verdict at all.
    assert decide(job(), driver(progress_at=None, launched_at=NOW - 3600), [started(ago=3600)]) == []


def test_an_idle_stream_a_watchdog_turned_off_or_a_flagged_job_gets_nothing_more():
    assert decide(stuck(), driver(), [started(idle=True)]) == []
    assert decide(job(progress_timeout_s=None), driver(), [started()]) == []
    assert decide(stuck(hung_since=NOW - 5, on_hung="warn"), driver(), [started()]) == []
    # not while starting, stopping or taking a savepoint
    for status, desired in (("SCHEDULED", "RUN"), ("CANCELING", "CANCEL"), ("DOING_SAVEPOINT", "SAVEPOINT")):
        actions = decide(stuck(status=status, desired=desired), driver(), [started()])
        assert not any(isinstance(a, r.FlagHung) for a in actions)


def test_a_pipeline_that_keeps_committing_hides_no_stuck_one():
    """Issue 30, finding 10: each pipeline is judged by its own checkpoints and tasks."""
    both = dict(stale_after_s=30.0, on_hung="fail", on_stale="warn")
    healthy = started(1, last_checkpoint_at=NOW - 1, progress_at=NOW - 1)
    stuck_one = started(2, last_checkpoint_at=NOW - 60, progress_at=NOW - 45)
    assert decide(stuck(**both), driver(progress_at=NOW - 1), [healthy, stuck_one]) == [r.FlagStale(60.0, "warn")]
    actions = decide(stuck(stale_since=NOW, **both), driver(progress_at=NOW - 1, tasks_done=9), [healthy, stuck_one])
    assert actions[0] == r.FlagHung(45.0, "fail")
    assert actions[-1].error.startswith("job hung: pipeline 2 of attempt 7 committed no batch"), actions[-1].error
    # a pipeline whose own tasks move is not hung, however long its batch
    slow = started(2, last_checkpoint_at=NOW - 60, progress_at=NOW - 2)
    assert decide(stuck(stale_since=NOW, **both), driver(progress_at=NOW - 1), [healthy, slow]) == []


def test_a_stale_and_hung_stream_is_flagged_for_each_once():
    both = dict(stale_after_s=30.0, on_hung="warn", on_stale="warn")
    first = decide(stuck(**both), driver(), [started()], last_checkpoint_at=NOW - 60)
    assert first == [r.FlagStale(60.0, "warn")]
    second = decide(stuck(stale_since=NOW, **both), driver(), [started()],
                    last_checkpoint_at=NOW - 60)
    assert second == [r.FlagHung(60.0, "warn")]


def test_savepoint_asked_while_the_job_waits_for_its_retry_ends_through_doing_savepoint():
    # Found by the simulation (seed 4): PENDING -> SAVEPOINT_DONE is no transition, so the
    # decision raised on every tick and the job never ended.
    ended = attempt(state="FAILED", ended_at=NOW - 5)
    actions = decide(job(status="PENDING", desired="SAVEPOINT", retries_used=1), ended, [pipe(status="CREATED")])
    assert actions == [r.SetStatus("DOING_SAVEPOINT"), r.EndPipelines("SAVEPOINT_DONE"), r.Finish("SAVEPOINT_DONE")]
    check_job("PENDING", "DOING_SAVEPOINT")        # both steps are transitions of the table
    check_job("DOING_SAVEPOINT", "SAVEPOINT_DONE")


def test_a_resumed_incarnation_waits_for_every_earlier_driver_to_be_gone():
    """Issue 21 finding 4: a resume marks the old incarnation's attempts LOST and asks their
    workers to kill them; the new incarnation's first driver starts only once they are gone,
    by the same rule as a retry (here the old driver's worker lives and has not reaped it)."""
    resumed = job(incarnation=2, status="PENDING", current_attempt=None)
    superseded = attempt(attempt_id=5, state="LOST", kill_requested=True, ended_at=None)
    snap = r.Snapshot(resumed, None, [pipe(status="CREATED")], {"w1": worker()}, {}, NOW, None, {},
                      (superseded,))
    assert r.reconcile_job(snap, T) == []
    reaped = attempt(attempt_id=5, state="LOST", kill_requested=True, ended_at=NOW - 0.1)
    snap = r.Snapshot(resumed, None, [pipe(status="CREATED")], {"w1": worker()}, {}, NOW, None, {},
                      (reaped,))
    assert r.reconcile_job(snap, T) == [r.CreateAttempt("w1")]


def test_a_driver_that_heartbeated_after_its_workers_lock_went_free_did_not_die_with_it():
    """Issue 21 finding 1: a server restart frees a live worker's lock. Its driver heartbeating
    after the lock was first seen free proves it outlived the lock: it is judged by its
    heartbeats, and nothing replaces it."""
    dead, workers = {"w1": NOW - 2.0}, [worker(beat=NOW - 3.0)]
    # The worker is gone, so its running attempt is lost; its driver will find itself fenced.
    beating = attempt(heartbeat_at=NOW - 0.5)
    [lost_action] = decide(job(), beating, [pipe()], workers=workers, dead=dead)
    assert isinstance(lost_action, r.MarkAttemptLost) and "outlived" in lost_action.reason
    # But no replacement while that driver may still run: it is judged by its own silence.
    lost = attempt(state="LOST", heartbeat_at=NOW - 0.5, error="worker w1 lost")
    assert decide(job(), lost, [pipe()], workers=workers, dead=dead) == []
    # A driver silent since the lock went free died with its worker: replaced at once.
    gone = attempt(state="LOST", heartbeat_at=NOW - 2.5, error="worker w1 lost")
    assert decide(job(), gone, [pipe()], workers=workers, dead=dead) == [r.ScheduleRetry(NOW, "worker w1 lost")]


def test_silence_while_the_leader_could_not_see_the_store_is_not_counted():
    """After the store's restart every heartbeat is as old as the outage: the leader counts
    silence only from when it could watch again (``observed_since``)."""
    outage_ended = NOW - 2.0
    stale_beat = attempt(heartbeat_at=NOW - 30)
    assert decide(job(), stale_beat, [pipe()], observed_since=outage_ended) == []
    assert decide(job(), stale_beat, [pipe()], workers=[worker(beat=NOW - 30)], observed_since=outage_ended) == []
    assert isinstance(decide(job(), stale_beat, [pipe()], observed_since=NOW - 11)[0], r.MarkAttemptLost)


def test_an_attempt_the_stores_absence_ended_is_retried_without_charge():
    """A stream lives through store restarts for months: an attempt that ended only because the
    store was out of reach (its driver fenced itself off, its worker's lock session ended) is
    retried even past job.retry.times, and the retry is not counted."""
    outage = attempt(state="FAILED", ended_at=NOW - 1, error="killed by its worker", charged=False)
    assert decide(job(retries_used=3), outage, [pipe()]) == [r.ScheduleRetry(NOW + 3.0, "killed by its worker", False)]
    own = attempt(state="FAILED", ended_at=NOW - 1, error="boom", charged=True)
    assert isinstance(decide(job(retries_used=3), own, [pipe()])[-1], r.Finish)


WAITS = "starting: pipeline 2 waits for its first offsets (sources Postgres-CDC; Spark: 'Getting offsets from X')"


@pytest.mark.parametrize("on_stale, restarted", [("restart", True), ("warn", False)])
def test_a_start_that_never_settles_is_judged_by_the_jobs_stale_policy_saying_what_it_waits_for(on_stale, restarted):
    """Outside review F3/F4: a start held for a source's first offsets is the user's policy's to judge (a fixed
    bound of the driver's no longer fails it), and the verdict says what the start waits for, as the driver
    wrote it: not only "pipeline 1, 2 completed no checkpoint"."""
    streaming = job(stale_after_s=180.0, on_stale=on_stale)
    held = "starting: a sink of pipeline 1 would remove data, and prepares its target once pipeline 2 has its first offsets"
    actions = decide(streaming, attempt(launched_at=NOW - 330),
                     [pipe(1, started_at=NOW - 260, waiting=held), pipe(2, started_at=NOW - 200, waiting=WAITS)])
    assert isinstance(actions[0], r.FlagStale)
    assert [type(a) for a in actions[1:]] == ([r.MarkAttemptLost] if restarted else []), actions
    if restarted:
        assert actions[1].reason.startswith("checkpoint stale: pipeline 1, 2 completed no checkpoint"), actions[1].reason
        assert actions[1].reason.endswith(f"; {held}; {WAITS}"), actions[1].reason


def test_a_start_up_judged_stuck_says_what_the_start_waits_for():
    """The start-up verdict (job.progress-timeout) says it too, not only "the driver's log names it"."""
    hung = job(progress_timeout_s=600.0, on_hung="restart", stale_after_s=None)
    actions = decide(hung, attempt(launched_at=NOW - 700), [pipe(2, started_at=None, waiting=WAITS)])
    assert [type(a) for a in actions] == [r.FlagHung, r.MarkAttemptLost], actions
    assert actions[1].reason.endswith(f"; {WAITS}"), actions[1].reason
