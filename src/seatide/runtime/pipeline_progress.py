"""What a running pipeline's query tells the store between its batches: rows read per batch
(from the query's progress), idleness and a micro-batch past ``checkpoint.timeout`` (from its
status).

A mixin of ``PipelineRun``, apart from it because it only reads: the query, the reporter, the
run's counted batch and its batch clock; ``poll`` calls it every 0.2 s.
"""

from __future__ import annotations

import time


class PipelineProgress:
    def _watch_trigger(self) -> None:
        """Report idleness (caught up with the sources) and micro-batches past checkpoint.timeout."""
        status = self.query.status
        idle = not status.get("isDataAvailable", True) and not status.get("isTriggerActive", False)
        if idle != self._idle:
            self.reporter.mark_pipeline(self.pipeline.pipeline_id, idle=idle)
            self._idle = idle
        batch_id = self._counted_batch + 1
        # A batch held at the start gate waits for the other pipelines' first offsets, not on its checkpoint:
        # its clock starts once it is let through (outside review F7).
        in_flight = status.get("isTriggerActive", False) and not self.held_at_start
        running_for = self._batch_clock.running_for(in_flight, batch_id, time.time())
        if running_for is None:
            return
        if running_for * 1000 > self.env.checkpoint_timeout_ms and self._timed_out_batch != batch_id:
            self._timed_out_batch = batch_id
            self.reporter.checkpoint_failed(self.pipeline.pipeline_id, batch_id, running_for,
                                            self.pipeline.fingerprint())

    def _report_progress(self) -> None:
        # Polled every 0.2 s: the last progress alone is cheap; the whole list (up to a hundred,
        # each parsed from JSON: 12-35 ms a call) only when batches went by between two polls.
        last = self.query.lastProgress
        if last is None or last.batchId <= self._counted_batch:
            return
        for progress in [last] if last.batchId == self._counted_batch + 1 else self.query.recentProgress:
            # An idle stream's progress (every 10 s) carries the id of the batch not yet run and
            # no addBatch: counted, it would stand for that batch and its rows never be.
            if progress.batchId <= self._counted_batch or "addBatch" not in (progress.durationMs or {}):
                continue
            if self._spark_counts_rows:
                rows = int(progress.numInputRows)
            else:
                metrics = progress.observedMetrics or {}
                rows = sum(int(metrics[name]["rows"]) for name in self._observations if name in metrics)
            self.reporter.rows_read(self.pipeline.pipeline_id, progress.batchId, rows)
            self._counted_batch = progress.batchId
