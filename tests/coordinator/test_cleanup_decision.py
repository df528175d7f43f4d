"""decide_cleanup: what one cleanup or expiry step does, decided from what it read."""

from types import SimpleNamespace

from seatide.coordinator.cleanup import (CleanupView, DecideExpiry, Forget, KillAttempt, MarkClean, ReleaseSources,
                                         RemoveCheckpoints, decide_cleanup)

DIRS = ("/data/j1/pipeline-1", "/data/j1/pipeline-2")


def result(status: str, cleanup: str = "DIRTY"):
    return SimpleNamespace(job_id="j1", incarnation=1, status=status, cleanup=cleanup)


def test_a_finished_job_releases_its_sources_and_removes_its_checkpoints_then_is_marked_clean():
    view = CleanupView(result("FINISHED"), current=True, checkpoint_dirs=DIRS, existing_dirs=DIRS[:1])
    assert decide_cleanup(view) == [ReleaseSources(), RemoveCheckpoints(DIRS[:1]),
                                    MarkClean(DIRS[:1], newer_incarnation=False)]


def test_a_stopped_job_keeps_its_checkpoints_for_a_resume():
    for status in ("CANCELED", "FAILED", "SAVEPOINT_DONE"):
        view = CleanupView(result(status), current=True, checkpoint_dirs=DIRS, existing_dirs=DIRS)
        assert decide_cleanup(view) == [MarkClean((), newer_incarnation=False)], status


def test_leftover_drivers_are_put_down_before_anything_is_removed():
    attempt = SimpleNamespace(attempt_no=3, pid=4242)
    view = CleanupView(result("FINISHED"), current=True, leftovers=(attempt,), checkpoint_dirs=DIRS,
                       existing_dirs=DIRS)
    effects = decide_cleanup(view)
    assert effects[0] == KillAttempt(attempt)
    assert isinstance(effects[-1], MarkClean)


def test_a_newer_incarnation_s_checkpoints_are_never_touched():
    view = CleanupView(result("FINISHED"), current=False, checkpoint_dirs=DIRS, existing_dirs=DIRS,
                       current_dirs=DIRS)
    assert decide_cleanup(view) == [MarkClean((), newer_incarnation=True)]
    expired = CleanupView(result("FINISHED", "CLEAN"), current=False, checkpoint_dirs=DIRS, current_dirs=DIRS)
    assert decide_cleanup(expired) == [Forget(whole_run=False)]     # the run's rows stay with the run


def test_an_old_run_of_a_reused_id_takes_everything_of_its_own_run_when_it_expires():
    newer = ("/data/j1/run-b/1", "/data/j1/run-b/2")
    expired = CleanupView(result("CANCELED", "CLEAN"), current=False, checkpoint_dirs=DIRS, current_dirs=newer,
                          same_run=False)
    assert decide_cleanup(expired) == [ReleaseSources(), RemoveCheckpoints(DIRS, with_job_root=True), Forget()]


def test_history_expiry_removes_everything_of_the_current_incarnation_then_its_rows():
    for status in ("FINISHED", "CANCELED"):
        view = CleanupView(result(status, "CLEAN"), current=True, checkpoint_dirs=DIRS)
        assert decide_cleanup(view) == [DecideExpiry(), ReleaseSources(), RemoveCheckpoints(DIRS, with_job_root=True),
                                        Forget()], status
