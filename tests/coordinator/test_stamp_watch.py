"""A silence is never counted longer than the leader has itself seen the heartbeat stand, on its
own monotonic clock: a step forward of the store host's clock does not make a live worker or
driver lost at once (outside review of stop 63, H1)."""

from __future__ import annotations

import time

from seatide import clock
from seatide.coordinator import reconcile as r
from seatide.coordinator.stamp_watch import StampWatch
from tests.coordinator.test_reconcile import NOW, T, attempt, job, pipe, worker

STEP_S = 15.0      # the store's clock jumps this far: more than every window judged here


def _snapshot(seen_from: dict, now: float, beat: float, driver_beat: float) -> r.Snapshot:
    return r.Snapshot(job(), attempt(heartbeat_at=driver_beat), [pipe()], {"w1": worker(beat=beat)}, {}, now,
                      None, {}, seen_from=seen_from)


def test_a_store_clock_step_does_not_make_a_live_worker_or_driver_lost():
    local = [500.0]
    previous = clock.use(time.time, monotonic=lambda: local[0])
    try:
        watch = StampWatch()
        beat, driver_beat = NOW - 1, NOW - 1
        first = watch.seen_from([beat, driver_beat], NOW, local[0])
        assert r.reconcile_job(_snapshot(first, NOW, beat, driver_beat), T) == []
        # One second later on every real clock, but the store's clock stepped 15 s forward.
        local[0] += 1.0
        stepped = NOW + 1.0 + STEP_S
        assert r.age(r.Snapshot(None, None, [], {}, now=stepped), beat) > T.worker_lost_after, "the step"
        seen = watch.seen_from([beat, driver_beat], stepped, local[0])
        assert r.reconcile_job(_snapshot(seen, stepped, beat, driver_beat), T) == [], \
            "a verdict on the store's clock alone"
        # Silent for the worker window on the leader's own clock too: lost now.
        local[0] += T.worker_lost_after
        later = stepped + T.worker_lost_after
        actions = r.reconcile_job(_snapshot(watch.seen_from([beat, driver_beat], later, local[0]), later, beat,
                                            driver_beat), T)
        assert len(actions) == 1 and isinstance(actions[0], r.MarkAttemptLost), actions
    finally:
        clock.use(previous)


def test_a_stamp_first_seen_now_counts_from_now_and_a_moved_one_is_dropped():
    local = [10.0]
    previous = clock.use(time.time, monotonic=lambda: local[0])
    try:
        watch = StampWatch()
        assert watch.seen_from([NOW - 30], NOW, local[0]) == {NOW - 30: NOW}
        local[0] += 2.0
        assert watch.seen_from([NOW - 30, None], NOW + 2, local[0]) == {NOW - 30: NOW}
        assert watch.seen_from([NOW + 1], NOW + 2, local[0]) == {NOW + 1: NOW + 2}
        watch.forget()
        local[0] += 5.0
        assert watch.seen_from([NOW + 1], NOW + 7, local[0]) == {NOW + 1: NOW + 7}
    finally:
        clock.use(previous)


def test_a_store_clock_step_does_not_flag_a_healthy_stream_stale():
    """Outside review round 2, M1: with ``on-stale fail`` one step of the store's clock failed a
    healthy job; the checkpoint's stamp is judged on the leader's own clock too."""
    local = [700.0]
    previous = clock.use(time.time, monotonic=lambda: local[0])
    try:
        watch = StampWatch()
        strict = job(stale_after_s=15, on_stale="fail")
        checkpoint, started = NOW - 2, NOW - 30
        live = attempt(heartbeat_at=NOW - 0.5, launched_at=NOW - 40, created_at=NOW - 40)

        def decide(now: float) -> list:
            pipes = [pipe(started_at=started, last_checkpoint_at=checkpoint)]
            seen = watch.seen_from([checkpoint, started, live.heartbeat_at, live.launched_at], now, local[0])
            return r.reconcile_job(r.Snapshot(strict, live, pipes, {"w1": worker(beat=now - 0.5)}, {}, now,
                                              checkpoint, {}, seen_from=seen), T)

        assert decide(NOW) == []
        local[0] += 1.0
        live.heartbeat_at = NOW + 1.0 + STEP_S - 0.5        # the driver beats on, stamped by the stepped clock
        assert decide(NOW + 1.0 + STEP_S) == [], "a healthy stream failed by a step of the store's clock"
        local[0] += 16.0                                     # no checkpoint for 16 s on every clock
        live.heartbeat_at = NOW + 17.0 + STEP_S - 0.5
        assert any(isinstance(a, r.Finish) for a in decide(NOW + 17.0 + STEP_S))
    finally:
        clock.use(previous)
