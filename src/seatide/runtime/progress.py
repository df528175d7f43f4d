"""Task progress: what the driver's heartbeat does not prove.

A heartbeat says the driver process lives; it says nothing of its work. A Spark task
that deadlocks leaves the driver heartbeating forever while nothing moves. The driver
therefore also samples Spark's status tracker and records, only when it changed, how
many tasks have completed (``AttemptReporter.task_progress``); the leader flags the job
HUNG when neither a batch commits nor a task completes for ``job.progress-timeout``
(``coordinator/reconcile.py``).

Each pipeline's tasks are counted apart as well, by its Spark job group (a streaming query
runs every job of its micro-batches, those of its ``foreachBatch`` included, under its run
id; a plain batch pipeline sets its own group): the leader judges each pipeline, so one
that hangs is not hidden by another that keeps completing tasks (issue 30, finding 10).
Jobs under no group (a sink's own threads) cannot be told apart: their progress counts for
every pipeline, never against one.

Completed tasks are counted per stage, each stage's last count folded into a total when it
leaves the tracker's active list, so a month-long stream keeps only its running stages.
Spark's Python API exposes no input rows or bytes of running tasks; a committed batch
(checkpoint) is the other sign of progress the leader reads.
"""

from __future__ import annotations

import logging
import time

from seatide.store.db import AttemptFenced

log = logging.getLogger(__name__)

# How often the driver samples; the store is written only when the count moved.
SAMPLE_INTERVAL_S = 1.0
MAX_UNSEEN_STAGES = 64


class TaskProgress:
    """Spark tasks completed in this driver's SparkContext, as a count that only grows."""

    def __init__(self, spark):
        self._tracker = spark.sparkContext.statusTracker()
        self._open: dict[int, int] = {}     # stage id -> completed tasks, while the stage may still run
        self._closed = 0                    # completed tasks of stages that have ended
        self._newest = -1                   # the highest stage id looked at

    def completed_tasks(self) -> int:
        active = set(self._tracker.getActiveStageIds())
        newest = max(active, default=self._newest)
        # Spark numbers stages in order: ids between two samples' newest ones belong to
        # stages that started (and perhaps ended) unseen, and their tasks count too. A
        # bounded look back: a session shared with earlier work (tests) has a long past.
        unseen = range(max(self._newest + 1, newest - MAX_UNSEEN_STAGES), newest + 1)
        for stage_id in active | set(self._open) | set(unseen):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:            # None once Spark forgot the stage: keep what we saw
                self._open[stage_id] = max(self._open.get(stage_id, 0), info.numCompletedTasks)
        self._newest = max(self._newest, newest)
        for stage_id in [s for s in self._open if s not in active]:
            self._closed += self._open.pop(stage_id)   # ended: its count no longer changes
        return self._closed + sum(self._open.values())


class GroupProgress:
    """Completed tasks of the jobs of each Spark job group, as a count per group that changes
    whenever one of its jobs makes progress (only compared, never shown)."""

    def __init__(self, spark):
        self._tracker = spark.sparkContext.statusTracker()
        self._ended: dict[str | None, dict[int, int]] = {}   # group -> its ended jobs' final counts

    def completed_tasks(self, group: str | None) -> int:
        """``None``: the jobs under no group."""
        ended = self._ended.setdefault(group, {})
        ids = self._tracker.getJobIdsForGroup(group)
        running = 0
        for job_id in ids:
            if job_id in ended:
                continue
            info = self._tracker.getJobInfo(job_id)
            if info is None:
                continue
            count = sum(stage.numCompletedTasks for stage in map(self._tracker.getStageInfo, info.stageIds)
                        if stage is not None)
            if info.status in ("SUCCEEDED", "FAILED"):
                ended[job_id] = count          # final: never asked again
            else:
                running += count
        # Jobs Spark has forgotten drop out of the sum: the count moves, which only says the
        # group ran something new (Spark forgets old jobs as new ones come).
        for job_id in set(ended) - set(ids):
            del ended[job_id]
        return sum(ended.values()) + running


class ProgressSampler:
    """Samples ``TaskProgress`` at most every ``interval`` seconds; reports a changed count,
    with the pipelines whose own tasks moved (``groups``: pipeline id -> its job group now)."""

    def __init__(self, progress: TaskProgress, report, interval: float = SAMPLE_INTERVAL_S,
                 groups: GroupProgress | None = None, pipeline_groups=dict):
        self.progress = progress
        self.report = report                 # called with the new count and the pipelines that moved
        self.interval = interval
        self.groups = groups
        self.pipeline_groups = pipeline_groups
        self._last_count = 0
        self._last_by_pipeline: dict[int, tuple] = {}
        self._next_at = 0.0

    def begin(self) -> None:
        """Every pipeline of the attempt has started: the watchdog's window opens now.

        Starting Spark and a query (seconds, more on a loaded host) is start-up, not a hang;
        the leader does not judge an attempt that has not reported its first progress."""
        self._take(always=True)

    def sample(self) -> None:
        self._take(always=False)

    def _take(self, always: bool) -> None:
        now = time.monotonic()
        if now < self._next_at and not always:
            return
        self._next_at = now + self.interval
        try:
            count = self.progress.completed_tasks()
            moved = self._pipelines_moved(always)
            if always or count != self._last_count or moved:
                self.report(count, moved)
                self._last_count = count
        except AttemptFenced:
            raise
        except Exception as exc:   # a store or Py4J hiccup: the next sample tries again
            log.warning("task progress not recorded: %s", exc)
            if always:
                self._next_at = 0.0
                self._last_count = -1       # report at the next sample, whatever the count
                self._last_by_pipeline = {}

    def _pipelines_moved(self, always: bool) -> list[int]:
        """The pipelines whose own tasks (or tasks under no group) moved since the last sample;
        every pipeline at the first one, which opens each pipeline's window."""
        if self.groups is None:
            return []
        unowned = self.groups.completed_tasks(None)
        moved = []
        for pipeline_id, group in sorted(self.pipeline_groups().items()):
            mark = (group, self.groups.completed_tasks(group), unowned)
            if always or self._last_by_pipeline.get(pipeline_id) != mark:
                moved.append(pipeline_id)
            self._last_by_pipeline[pipeline_id] = mark
        return moved
