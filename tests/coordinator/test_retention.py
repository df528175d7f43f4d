"""Retention on a real store: a streaming-shaped job's 1,200 checkpoint rows and 500 events,
written through the driver's own reporter, are pruned to what the rules keep; counts never go
down; what a resume needs stays (and a real resume from a pruned store continues exactly);
set-aside checkpoint directories and attempt logs go after their age, younger ones stay."""

from __future__ import annotations

import os
import time

import pytest
from sqlalchemy import func, select, update

from seatide import intents
from seatide.coordinator.retention import DAY_S, Pruner, RetentionRules
from seatide.coordinator.service import Coordinator, node_heartbeat, register_node
from seatide.runtime.reporter import AttemptReporter
from seatide.store import schema as s
from seatide.store.db import NotLeader, open_store
from seatide.store.jobs import request_stop
from seatide.store.stats import store_stats
from seatide.store.checkpoint_views import checkpoint_report
from seatide.testing.cluster import wait_for
from seatide.testing.jobs import assert_exactly, streaming_job, written_ids

RETAINED = 20
JOB = f"""
env {{ job.mode = STREAMING, checkpoint.interval = 1000, checkpoint.retained = {RETAINED} }}
source {{ FakeSource {{ plugin_output = "a", row.num = 10, schema = {{ fields {{ id = bigint }} }} }} }}
source {{ FakeSource {{ plugin_output = "b", row.num = 10, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Console {{ plugin_input = "a" }} }}
sink {{ Console {{ plugin_input = "b" }} }}
"""


@pytest.fixture
def leader(store_url, tmp_path):
    store = open_store(store_url)
    coordinator = Coordinator(store, node_id="c-retention", data_dir=str(tmp_path))
    assert coordinator.lease.tick()
    yield coordinator, store, str(tmp_path)
    store.dispose()


def _running_attempt(coordinator, store, data_dir, job_id: str) -> AttemptReporter:
    intents.submit(store, data_dir, text=JOB, job_id=job_id, actor="test")
    # After the submit, which may take longer than the lease or a worker's heartbeat timeout on a
    # loaded machine (its first config parse imports the SQL machinery): a fresh lease, a live worker.
    assert coordinator.lease.tick()
    register_node(store, "w-retention", "worker", slots=2)
    attempt = wait_for(lambda: _leading_tick(coordinator, store) or _current_attempt(store, job_id), 30,
                       interval=0.05, message="an attempt assigned")
    with store.write() as conn:      # claimed, as a worker claims it
        conn.execute(update(s.attempts).where(s.attempts.c.attempt_id == attempt).values(state="LAUNCHING"))
    reporter = AttemptReporter(store, job_id, 1, attempt)
    reporter.mark_running(pid=0)
    return reporter


def _leading_tick(coordinator, store) -> None:
    """One pass of what a coordinator's loop and a worker do: renew (or win again) the lease, beat the
    worker's heart, reconcile. A pass slower than the lease on a loaded machine (reading the snapshot
    took 3.9 s under a CPU hog) loses leadership; the real loop wins it back on its next pass, and so
    must this one, or every later reconcile_all does nothing."""
    coordinator.lease.tick()
    node_heartbeat(store, "w-retention")
    coordinator.reconcile_all()


def _current_attempt(store, job_id: str) -> int | None:
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.current_attempt).where(s.jobs.c.job_id == job_id)).scalar()


def _count(store, table, *where) -> int:
    with store.read() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar()


def test_pruning_bounds_rows_and_events_and_keeps_what_a_resume_needs(leader):
    coordinator, store, data_dir = leader
    driver = _running_attempt(coordinator, store, data_dir, "se-month")
    batches = 600
    failed_1 = batches // 100          # pipeline 1 fails one checkpoint in every 100
    for batch in range(batches):
        for pipeline in (1, 2):
            driver.batch_committed(pipeline, batch, 10, 3, {"offset": batch}, f"f{pipeline}")
        if batch == 300:
            driver.savepoint({1: batch, 2: batch}, copy=lambda savepoint_id: None)
        if batch % 100 == 99:
            driver.checkpoint_failed(1, batch + 1, 61.0, "f1")      # an event each, and a FAILED row
    # Pipeline 2's newest rows all failed: its newest completed one is what a resume looks for.
    for batch in range(batches, batches + RETAINED + 5):
        driver.checkpoint_failed(2, batch, 61.0, "f2")
    for n in range(400):
        driver.pipeline_restored(1, n)                               # events, through the reporter
    recent_since = time.time()
    for n in range(120):
        driver.pipeline_restored(2, n)
    with store.read() as conn:
        before = checkpoint_report(conn, "se-month")
    rows_before = _count(store, s.checkpoints)
    with store.read() as conn:
        newest_id = conn.execute(select(func.max(s.checkpoints.c.checkpoint_id))).scalar()
    assert rows_before > 1200 and before["completed"] == 2 * batches + 1 and before["failed"] == failed_1 + RETAINED + 5

    now = time.time()        # the events' age cutoff falls exactly at `recent_since`
    # slice_s=0: one transaction of at most `batch` rows per kind per run
    rules = RetentionRules(events_per_job=100, events_days=(now - recent_since) / DAY_S, batch=400, slice_s=0)
    pruner = Pruner(store, data_dir, rules)
    assert coordinator.lease.tick()
    epoch = coordinator.lease.epoch
    with pytest.raises(NotLeader):
        pruner.run(epoch + 1, now)                        # a stale or foreign epoch prunes nothing
    assert _count(store, s.checkpoints) == rows_before

    runs = 0
    while runs == 0 or pruner.next_at <= now:             # a backlog takes several bounded runs
        assert coordinator.lease.tick()
        done = pruner.maybe_run(epoch, now)
        assert done.checkpoints <= rules.batch and done.events <= rules.batch
        runs += 1
    assert runs >= 3, "about 1200 rows beyond retention, 400 a run, take several runs"
    assert pruner.maybe_run(epoch, now) is None, "between runs the step costs nothing"

    c = s.checkpoints
    kept = {p: _count(store, c, c.c.pipeline_id == p, c.c.kind == "CHECKPOINT") for p in (1, 2)}
    assert kept == {1: RETAINED, 2: RETAINED + 1}
    assert _count(store, c, c.c.kind == "SAVEPOINT") == 1
    with store.read() as conn:
        newest_completed = conn.execute(select(func.max(c.c.batch_id)).where(
            c.c.pipeline_id == 2, c.c.status == "COMPLETED")).scalar()
        after = checkpoint_report(conn, "se-month")
        stats = {p.row.pipeline_id: (p.completed, p.failed) for p in store_stats(conn).jobs[0].pipelines}
    assert newest_completed == batches - 1
    assert (after["completed"], after["failed"], after["lastCheckpointId"]) == \
        (before["completed"], before["failed"], before["lastCheckpointId"]), "counts never go down"
    assert stats == {1: (batches, failed_1), 2: (batches, RETAINED + 5)}
    # The newest 100 of the job, or everything recorded since `recent_since`: here the 120 recent ones.
    e = s.events
    assert _count(store, e, e.c.job_id == "se-month", e.c.kind == "CHECKPOINT_RESTORED") == 120
    assert _count(store, e, e.c.job_id == "se-month", e.c.at < recent_since) == 0
    # The driver goes on: ids continue, a replayed batch is still recognised, a new one recorded.
    assert driver.batch_committed(1, batches - 1, 10, 3, None, "f1") is not None
    assert driver.batch_committed(1, batches, 10, 3, None, "f1") == newest_id + 1


def test_set_aside_directories_and_ended_attempt_logs_go_after_their_age(leader):
    coordinator, store, data_dir = leader
    driver = _running_attempt(coordinator, store, data_dir, "se-files")
    with store.read() as conn:       # the run's directory, beside its pipelines' (store/runs.py)
        root = os.path.dirname(conn.execute(select(s.pipelines.c.checkpoint_dir).where(
            s.pipelines.c.job_id == "se-files").limit(1)).scalar())
    old_ms, young_ms = int((time.time() - 8 * DAY_S) * 1000), int((time.time() - 3600) * 1000)
    for name in (f"1.discarded-{old_ms}", f"2.replaced-{old_ms}", f"1.replaced-{young_ms}", "1", "savepoints",
                 "2.restoring-3", "1.restoring-4"):
        os.makedirs(os.path.join(root, name, "spark"))
    # A resume's staging copy: abandoned for a week (its driver died, the job was cancelled), or fresh.
    old_s = time.time() - 8 * DAY_S
    os.utime(os.path.join(root, "2.restoring-3"), (old_s, old_s))
    logs = os.path.join(data_dir, "logs", "se-files")
    os.makedirs(logs)
    old = time.time() - 8 * DAY_S
    paths = {}
    for name, mtime in (("attempt-900001.log", old), ("attempt-900002.log", time.time() - 3600),
                        (f"attempt-{driver.attempt_id}.log", old)):   # the live attempt's, quiet for long
        paths[name] = os.path.join(logs, name)
        with open(paths[name], "w") as handle:
            handle.write("log\n")
        os.utime(paths[name], (mtime, mtime))
    gone_job = os.path.join(data_dir, "logs", "se-expired")      # a job whose history expired
    os.makedirs(gone_job)
    with open(os.path.join(gone_job, "attempt-900003.log"), "w"):
        pass
    os.utime(os.path.join(gone_job, "attempt-900003.log"), (old, old))

    assert coordinator.lease.tick()
    done = Pruner(store, data_dir, RetentionRules()).run(coordinator.lease.epoch, time.time())

    assert (done.directories, done.logs) == (3, 2)
    assert sorted(os.listdir(root)) == ["1", f"1.replaced-{young_ms}", "1.restoring-4", "savepoints"]
    assert sorted(os.listdir(logs)) == sorted(["attempt-900002.log", f"attempt-{driver.attempt_id}.log"])
    assert not os.path.exists(gone_job), "an emptied job log directory goes too"


@pytest.mark.spark
def test_a_job_resumed_after_pruning_continues_with_no_duplicate_and_no_gap(spark, tmp_path):
    from tests.e2e.harness import InProcessCluster

    local = InProcessCluster(spark, str(tmp_path / "data"))
    out = str(tmp_path / "out")
    text = streaming_job(out, splits=4000, rows_per_split=5, interval_ms=300, read_interval_ms=60).replace(
        "job.mode = STREAMING", "job.mode = STREAMING\n  checkpoint.retained = 3")

    def cancel_after(checkpoints: int):
        def stop(store, job_id):
            deadline = time.time() + 180
            while time.time() < deadline:
                with store.read() as conn:
                    if checkpoint_report(conn, job_id)["completed"] >= checkpoints:
                        break
                time.sleep(0.2)
            request_stop(store, job_id, actor="test")
        return stop

    first = local.run(text, job_id="se-pruned", stop_after=cancel_after(12))
    assert first.status == "CANCELED"
    with local.store.read() as conn:
        assert checkpoint_report(conn, "se-pruned")["completed"] >= 12
    written = len(written_ids(out))
    assert local.coordinator.lease.tick()
    Pruner(local.store, local.data_dir).run(local.coordinator.lease.epoch, time.time())
    assert len(first.checkpoints()) == 3

    intents.resume(local.store, "se-pruned", actor="test")
    second = local.drive("se-pruned", stop_after=cancel_after(5))
    assert second.status == "CANCELED"
    assert "CHECKPOINT_RESTORED" in [e.kind for e in local.events("se-pruned")]
    ids = written_ids(out)
    assert len(ids) > written, "the resumed job wrote more"
    assert_exactly(ids, range(max(ids) + 1))


def test_published_sink_manifests_beyond_retention_go_and_an_unpublished_decision_stays(leader):
    coordinator, store, data_dir = leader
    driver = _running_attempt(coordinator, store, data_dir, "se-files")
    for batch in range(RETAINED + 40):
        for plugin in ("sink[0]", "sink[1]"):
            driver.decide_batch(1, plugin, batch, f"T{batch}", {"publish": {}, "state": {"rows": 1}})
            if not (plugin == "sink[0]" and batch == 3):     # decided, never published (a crash)
                driver.batch_published(1, plugin, f"T{batch}")
    assert coordinator.lease.tick()
    done = Pruner(store, data_dir, RetentionRules(slice_s=5.0)).run(coordinator.lease.epoch, time.time())
    m = s.sink_manifests
    assert done.manifests == 2 * 40 - 1
    for plugin in ("sink[0]", "sink[1]"):
        with store.read() as conn:
            left = conn.execute(select(m.c.batch_id, m.c.status).where(m.c.plugin_id == plugin)
                                .order_by(m.c.batch_id)).all()
        published = [b for b, status in left if status == "PUBLISHED"]
        assert published == list(range(40, RETAINED + 40)), plugin
        assert [b for b, status in left if status == "DECIDED"] == ([3] if plugin == "sink[0]" else [])
