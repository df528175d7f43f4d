"""One pipeline of one attempt, on Spark.

Checkpointed pipelines (STREAMING, or BATCH with ``checkpoint.interval``) run as one
Structured Streaming query whose ``foreachBatch`` writes every sink exactly once per
micro-batch and then records the batch as a checkpoint in the store. Other BATCH
pipelines run as plain Spark jobs: one batch, id 0, through the same exactly-once path.

Checkpoint directory of a pipeline::

    <dir>/spark/          Spark's checkpoint (offsets, commits, state)
    <dir>/sinks/<id>/     each sink's commit log (runtime/commit_log.py)
    <dir>/seatide.json    lineage id and fingerprint of the pipeline that wrote it
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TextIO

from seatide import failpoints
from seatide.config.env import JobEnv
from seatide.plan.dag import Pipeline
from seatide.plugin.evolution import schema_change_in
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.plugin.tables import TableFrames
from seatide.runtime import local_batch, schema_evolution
from seatide.runtime.batch_clock import BatchClock
from seatide.runtime.failures import describe_error
from seatide.runtime.offset_log import batch_offsets, logged_offsets
from seatide.runtime.pipeline_dir import claim_pipeline_dir
from seatide.runtime.pipeline_frames import PipelineFrames
from seatide.runtime.pipeline_progress import PipelineProgress
from seatide.runtime.session import activate_session
from seatide.runtime.reporter import AttemptReporter
from seatide.runtime.sink_runs import PipelineSinks, each_sinks_rows, one_stream
from seatide.runtime.start_gate import StopAtBatchBoundary
from seatide.runtime.stream_check import check_stream, start_query
from seatide.runtime.table_routing import RoutedPipeline
from seatide.store.states import Desired, PipelineStatus

log = logging.getLogger(__name__)

@dataclass
class Outcome:
    status: str                 # RUNNING FINISHED FAILED CANCELED SAVEPOINT_DONE
    error: str | None = None
    permanent: bool = False     # no retry can fix it (bad data, bad SQL)


class PipelineRun(PipelineFrames, PipelineProgress):
    """One pipeline of one attempt: its checkpoint directory claimed, its query started and
    watched, each batch written and recorded. How its DataFrames are built is the mixin's
    (``pipeline_frames.py``), what its query's progress and status tell the store the other's
    (``pipeline_progress.py``)."""

    def __init__(self, spark, pipeline: Pipeline, env: JobEnv, job_id: str, checkpoint_dir: str,
                 reporter: AttemptReporter, stdout: TextIO, job_sinks: tuple = ()):
        self.spark = spark
        self.pipeline = pipeline
        self.env = env
        self.job_id = job_id
        self.dir = checkpoint_dir
        self.spark_dir = os.path.join(checkpoint_dir, "spark")    # this attempt's own, once claimed
        self.reporter = reporter
        self.stdout = stdout
        self.job_sinks = job_sinks          # every pipeline's sinks (SinkContext.job_sinks)
        self.query = None
        self.thread: threading.Thread | None = None
        self.outcome = Outcome(PipelineStatus.RUNNING)
        self.failure: BaseException | None = None   # the Python exception behind a failed batch
        self.stop_requested: str | None = None      # CANCEL | SAVEPOINT
        self._counted_batch = -1
        self.sinks: PipelineSinks | None = None     # every sink on the one protocol (runtime.sink_runs)
        self.sink_frames: list = []                 # (sink spec, DataFrame it writes), built at ``open``
        self.lineage = ""
        self.origin = ""
        self._observations: list = []
        self._spark_counts_rows = False     # rows read: the progress's numInputRows (PipelineFrames._frames)
        self._planned_rows = 0              # rows of sources that know their count up front
        self._rows_read: int | None = None
        self._idle = False
        self._batch_clock = BatchClock()
        self._timed_out_batch = -1
        self.began_batch = False            # its query ran a batch: a failure since is not a refusal at its start
        self.held_at_start = False          # a batch waits at the start gate: no checkpoint running late
        self.routed: RoutedPipeline | None = None    # a multi-table pipeline (runtime.table_routing)
        self._known: dict | None = None     # the tables' shapes kept with the checkpoint (schema_evolution)
        self._seen: dict | None = None      # a changed table's shape as the stream showed it
        self._last_change: str | None = None
        self._prepared = False              # ``prepare`` done for the query about to start
        # (target key) -> None: the attempt's start gate, passed before a save mode removes data (runtime/start_gate.py)
        self.start_gate = None

    # -- running -------------------------------------------------------------------------
    def open(self) -> bool:
        """All of the start that comes before the job's checks ahead (``pipeline_start.check_sinks_ahead``):
        the checkpoint directory claimed, the frames built, the sinks opened (decided batches rolled
        forward). False: it failed, as its outcome says."""
        self.reporter.pipeline_status(self.pipeline.pipeline_id, PipelineStatus.RUNNING)
        activate_session(self.spark)     # a driver builds its session on another thread
        try:
            claimed = claim_pipeline_dir(self.reporter, self.pipeline, self.env, self.job_id, self.dir)
            self.lineage, self.origin, self.spark_dir = claimed.lineage, claimed.origin, claimed.spark_dir
            self._known = schema_evolution.known_shapes(self.dir)
            self.sink_frames = self._frames()
            self.sinks = PipelineSinks(self.spark, self.pipeline, self.env, self.job_id, self.dir, self.reporter,
                                       self.stdout, self.lineage, self.origin, routed=self.routed is not None,
                                       job_sinks=self.job_sinks, start_gate=self.start_gate)
            return True
        except Exception as exc:  # building the plan failed: bad SQL, missing field, ...
            log.exception("pipeline %s failed to start", self.pipeline.pipeline_id)
            self.fail(exc)
            return False

    def checked_frames(self) -> list:
        """(sink spec, what its checks ahead see): its DataFrame, or a routed sink's tables without rows."""
        if self.routed is None:
            return self.sink_frames
        return [(sink, self.routed.fields_of(sink)) for sink, _ in self.sink_frames]

    def prepare(self) -> bool:
        """The rest of the start that may refuse the pipeline, none of it a batch: Spark's checks of its
        streaming query (``stream_check``), then the sources' schema changes handed to the sinks
        (``schema_evolution.evolve``, which refuses under ``exception``, as a sink may refuse a change).
        The driver prepares every pipeline of the attempt before any query starts (``pipeline_start``).
        Opens first unless ``open`` did. False: it failed, as its outcome says."""
        if self.outcome.status != PipelineStatus.RUNNING or (self.sinks is None and not self.open()):
            return False      # failed at ``open``, or refused by the job's checks ahead
        if self._prepared:
            return True
        try:
            if self.env.micro_batch:
                check_stream(self._query_frame(self.sink_frames))
            changes = schema_evolution.evolve(self.dir, [s.plugin for s in self.pipeline.sources],
                                              list(self.sinks.runs.values()))
            if changes:
                log.info("pipeline %s: the sinks took the tables' changes: %s", self.pipeline.pipeline_id,
                         "; ".join(c.describe() for c in changes))
            self._seen = None
            self._prepared = True
            return True
        except Exception as exc:  # noqa: BLE001 - a refusal, or the server's error while asking: judged by fail
            log.exception("pipeline %s failed to start", self.pipeline.pipeline_id)
            self.fail(exc)
            return False

    def start(self) -> None:
        """Start the query (a plain batch: its thread), after ``prepare`` (done here unless the driver did)."""
        if not self.prepare():
            return
        sinks = self.sink_frames
        try:
            if self.env.micro_batch:
                self._start_query(sinks)
            else:
                self.thread = threading.Thread(target=self._run_plain_batch, args=(sinks,),
                                               name=f"pipeline-{self.pipeline.pipeline_id}", daemon=True)
                self.thread.start()
        except Exception as exc:  # building the plan failed: bad SQL, missing field, ...
            log.exception("pipeline %s failed to start", self.pipeline.pipeline_id)
            self.fail(exc)

    def _write_sinks(self, sinks: list, batch_id: int) -> int:
        rows, replayed = 0, True
        for sink, df in sinks:
            failpoints.hit("driver.before_sink_write", scope=self.pipeline.pipeline_id)
            result = self.sinks.write(sink.plugin_id, df, batch_id)
            # A replay's rows too: its attempt may have died after the sink's decision, before the
            # checkpoint took them; a checkpoint takes a batch's rows once (reporter.batch_committed).
            rows += int(result.state.get("rows", 0))
            replayed = replayed and result.replayed
            if not result.replayed:
                if self._rows_read is None and not self.env.micro_batch:
                    # the first action fills the source observations; later sinks run the sources again
                    self._rows_read = self._planned_rows + sum(int(o.get.get("rows", 0)) for o in self._observations)
                failpoints.hit("driver.after_sink_commit")
        if replayed and sinks and self.env.micro_batch and self.routed is None:
            # Every sink's decision stood, so nothing ran the batch's frame: neither Spark's count
            # nor an observation saw its rows, and the attempt that decided it died before its
            # progress could count them. One count runs them (a replay's cost, after a crash only).
            frames = sinks[0][1]
            (frames.frames[0] if isinstance(frames, TableFrames) else frames).count()
        return rows

    def job_group(self) -> str | None:
        """The Spark job group of its jobs now (runtime/progress.py): its query's run id (set on the
        stream thread, where foreachBatch runs), or a plain batch pipeline's own; None before."""
        if not self.env.micro_batch:
            return f"seatide-{self.job_id}-{self.pipeline.pipeline_id}"
        return None if self.query is None else str(self.query.runId)

    def _run_plain_batch(self, sinks: list) -> None:
        activate_session(self.spark)
        self.spark.sparkContext.setJobGroup(self.job_group(), f"pipeline {self.pipeline.pipeline_id}", True)
        started = time.time()
        try:
            if self.routed is not None:
                rows = self._write_routed(sinks[0][1], 0)
            else:
                rows = self._write_sinks(sinks, 0)
            if self.stop_requested:
                self.outcome = Outcome(PipelineStatus.CANCELED)
                return
            if self._rows_read is not None:   # None: every sink had committed already (a rerun)
                self.reporter.rows_read(self.pipeline.pipeline_id, 0, self._rows_read)
            self.reporter.batch_committed(self.pipeline.pipeline_id, 0, rows,
                                          int((time.time() - started) * 1000), None,
                                          self.pipeline.fingerprint())
            self._finish()
        except Exception as exc:
            if self.stop_requested:
                self.outcome = Outcome(PipelineStatus.CANCELED)
            else:
                self.fail(exc)

    def _write_routed(self, batch_df, batch_id: int) -> int:
        """One batch of a multi-table pipeline: every sink gets each table's rows (one decision each)."""
        offsets = batch_offsets(self.spark_dir, batch_id) if self.env.micro_batch else None
        rows = self.routed.rows(batch_df, offsets)
        try:
            written = self._write_sinks([(sink, self.routed.frames(rows, sink)) for sink in self.pipeline.sinks],
                                        batch_id)
        finally:
            self.routed.release(rows)
        # Rows read: counted per table where the batch was counted, else what the first sink wrote.
        self._rows_read = sum(rows.counts.values()) if rows.counts else written
        return written

    def _query_frame(self, sinks: list):
        """The one streaming DataFrame the query runs (a multi-table pipeline's: its source's)."""
        return sinks[0][1] if self.routed is not None else one_stream(sinks)

    def _start_query(self, sinks: list) -> None:
        env = self.env
        query_df = self._query_frame(sinks)

        def on_batch(batch_df, batch_id: int) -> None:
            try:
                self._on_batch(sinks, batch_df, batch_id)
            except BaseException as exc:
                self.failure = exc
                raise

        writer = (query_df.writeStream.foreachBatch(on_batch)
                  .option("checkpointLocation", self.spark_dir)
                  .queryName(f"seatide-{self.job_id}-{self.pipeline.pipeline_id}"))
        if env.streaming:
            writer = writer.trigger(processingTime=f"{env.trigger_interval_ms} milliseconds")
        else:
            writer = writer.trigger(availableNow=True)
        self.query = start_query(writer)

    def _on_batch(self, sinks: list, batch_df, batch_id: int) -> None:
        failpoints.hit("driver.batch_start", released=lambda: self.stop_requested is not None,
                       scope=self.pipeline.pipeline_id)
        if self.stop_requested:
            # Availably-now batches follow each other without a pause: without this check a
            # cancelled bounded job would go on committing until its data ran out.
            raise StopAtBatchBoundary(f"pipeline {self.pipeline.pipeline_id} stopped before batch {batch_id}")
        started = time.time()
        self.began_batch = True
        if self.routed is not None:
            rows = self._write_routed(batch_df, batch_id)
            self.reporter.rows_read(self.pipeline.pipeline_id, batch_id, self._rows_read)
            self._record_batch(batch_id, rows, started)
            return
        if len(sinks) > 1:
            batch_df = batch_df.persist()     # each sink's rows are read out of it
        try:
            rows = self._write_sinks(self._small_batch(sinks, batch_df, batch_id) or
                                     each_sinks_rows(sinks, batch_df), batch_id)
        finally:
            if len(sinks) > 1:
                batch_df.unpersist()
        self._record_batch(batch_id, rows, started)

    def _small_batch(self, sinks: list, batch_df, batch_id: int) -> list | None:
        """[(the one sink, its rows offered collected on the driver)] when its source bounds the batch
        as small (runtime.local_batch); None: the batch's frame as it is."""
        pipeline = self.pipeline
        if len(sinks) != 1 or len(pipeline.sources) != 1 or pipeline.transforms:
            return None
        ends = logged_offsets(self.spark_dir, batch_id)
        frames = local_batch.offered(batch_df, pipeline.sources[0].plugin, ends[0] if ends else None)
        return None if frames is None else [(sinks[0][0], frames)]

    def _record_batch(self, batch_id: int, rows: int, started: float) -> None:
        self.reporter.batch_committed(self.pipeline.pipeline_id, batch_id, rows,
                                      int((time.time() - started) * 1000), self._offsets(batch_id),
                                      self.pipeline.fingerprint())
        failpoints.hit("driver.after_checkpoint")     # recorded, before Spark's own commit log has the batch
        self.sinks.prune(batch_id - self.env.checkpoints_retained)

    def _offsets(self, batch_id: int) -> dict | None:
        sources = logged_offsets(self.spark_dir, batch_id)
        return None if sources is None else {"batch": batch_id, "sources": sources}

    # -- observing -----------------------------------------------------------------------
    def poll(self) -> Outcome:
        """Advance what can be observed from the outside; returns the current outcome."""
        if self.outcome.status != PipelineStatus.RUNNING or self.query is None:
            return self.outcome
        self._report_progress()
        if self.query.isActive:
            self._watch_trigger()
            return self.outcome
        exc = self.query.exception()
        if exc is not None and not isinstance(self.failure, StopAtBatchBoundary):
            change = None if self.stop_requested else schema_change_in(str(self.failure or exc))
            if change is None or not self._restart_for(change):
                self.fail(self.failure or exc)
        elif self.stop_requested:
            self.outcome = Outcome(PipelineStatus.SAVEPOINT_DONE if self.stop_requested == Desired.SAVEPOINT
                                   else PipelineStatus.CANCELED)
        else:
            self._report_progress()
            self._finish()
        return self.outcome

    def _restart_for(self, change: dict) -> bool:
        """A source stopped the query because a table's shape changed (plugin/evolution.py): start
        it again with the new shape, from the same checkpoint. False when the same change stops it
        again at once (the new shape did not take)."""
        key = json.dumps(change, sort_keys=True)
        if key == self._last_change:
            return False
        self._last_change = key
        log.info("pipeline %s: table %s changed; the query starts again with its new columns",
                 self.pipeline.pipeline_id, change.get("table"))
        self._seen = {change["table"]: change.get("seen")}
        self.query, self.failure, self.sinks, self.routed, self._prepared = None, None, None, None, False
        self.start()
        return self.outcome.status == PipelineStatus.RUNNING

    def _finish(self) -> None:
        """End of data: last sink checks (e.g. Assert's MIN_ROW), then durable completion."""
        try:
            self.sinks.end_of_data()
        except Exception as exc:
            self.fail(exc)
            return
        for source in self.pipeline.sources:
            self.reporter.source_ended(self.pipeline.pipeline_id, source.plugin_id)
        failpoints.hit("driver.before_pipeline_end", scope=self.pipeline.pipeline_id)
        self.reporter.pipeline_status(self.pipeline.pipeline_id, PipelineStatus.FINISHED)
        self.outcome = Outcome(PipelineStatus.FINISHED)

    def refuse(self, error: str, permanent: bool) -> None:
        """Failed for another pipeline's refusal, before it began (``pipeline_start``); a query already
        started is stopped, as a failure's would be (not left running until the driver exits)."""
        self.outcome = Outcome(PipelineStatus.FAILED, error=error, permanent=permanent)
        if self.query is not None:
            self.stop_requested = self.stop_requested or Desired.CANCEL
            try:
                self.query.stop()
            except Exception:  # noqa: BLE001 - ended by its own failure meanwhile: the refusal stands
                pass

    def fail(self, exc: BaseException) -> None:
        error, permanent = describe_error(exc)
        if not permanent:
            log.error("pipeline %s failed: %s", self.pipeline.pipeline_id,
                      "".join(traceback.format_exception(exc))[-4000:])
        self.outcome = Outcome(PipelineStatus.FAILED, error=error, permanent=permanent)

    # -- stopping ------------------------------------------------------------------------
    def request_stop(self, mode: str) -> None:
        """Stop after the running micro-batch commits (SAVEPOINT waits longer than CANCEL)."""
        if self.stop_requested or self.outcome.status != PipelineStatus.RUNNING:
            return
        self.stop_requested = mode
        if self.query is not None:
            # Let a running micro-batch commit, so the sink's output ends on a batch boundary;
            # a cancel waits briefly (the coordinator kills a driver that takes too long).
            timeout = self.env.checkpoint_timeout_ms / 1000 if mode == "SAVEPOINT" else 10.0
            _wait_until_idle(self.query, timeout_s=timeout)
            self.query.stop()
        elif self.thread is not None:
            self.spark.sparkContext.cancelJobGroup(self.job_group())


def _wait_until_idle(query, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline and query.isActive and query.status.get("isTriggerActive"):
        time.sleep(0.1)


__all__ = ["Outcome", "PipelineRun", "ROW_KIND_COLUMN"]
