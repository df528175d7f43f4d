"""The sinks of one pipeline run, each driven by the one sink protocol (``plugin/sink_protocol.py``)
over this attempt's fenced store decisions and the checkpoint's commit logs.

Names that carry a sink's records, per pipeline:

* a batch's transaction id: ``T_<run>_<pipeline>_<sink>_<lineage>_<batch>``: no other run, and no
  other branch of the pipeline's checkpoints, commits under it; distinct per sink;
* a target's save-mode decision: ``P_<run>@<target>``, in the store under the job's
  ``TARGET_RECORDS`` (pipeline ``JOB_RECORDS``), shared by every sink of every pipeline of the job
  that writes the target: one decision per job run and target, so a second writer (a sink of the
  pipeline or of another one) that first prepares the target after the first committed into it
  destroys nothing the job wrote. A run's resumes and restores from savepoints keep the run, so
  its save modes are not made again; a new run (a new submission) makes them. A pipeline started
  over (``--fallback fresh``) has them made anew, as a new submission would: its lineage began at
  that fresh start (``"began"`` in its ``seatide.json``, ``store.runs.began_anew``), and its
  decisions are ``P_<run>~<incarnation>@<target>``, ``<incarnation>`` the resume's that decided the
  fresh start (a later incarnation that makes a move it owed keeps it: one decision, one scope),
  shared by every pipeline that decision starts over; rows of pipelines not started over are never
  destroyed (``store/kept_output.py`` refuses). A pipeline started over that never began a batch
  before has nothing of its own to destroy: where its decision would be refused so, it follows the
  run's (``store/own_output.py``). A decision found recorded and never carried out is carried out
  late only over nothing committed since by another scope (``store/owed_destroy.py``).
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import replace

from seatide.plugin.base import Sink, SinkContext
from seatide.plugin.sink_protocol import BatchResult, SaveModeDoor, SinkRun, open_sink
from seatide.plugin.sink_records import SinkDecisions
from seatide.runtime.commit_log import FileDecisions, SinkCommitLog, StoreDecisions, read_json

log = logging.getLogger(__name__)

TARGET_RECORDS = "targets"     # the plugin id the job's target records are kept under
JOB_RECORDS = 0                # ... and their pipeline: the job's, not one pipeline's (those count from 1)
_SINK_TAG = "__seatide_sink"


def commit_log_of(checkpoint_dir: str, plugin_id: str, lineage: str) -> SinkCommitLog:
    """A sink's commit log in a pipeline's checkpoint, for the checkpoint's lineage: a mark
    another lineage wrote there (a replaced driver's, after a resume moved the directory) is not its."""
    return SinkCommitLog(os.path.join(checkpoint_dir, "sinks", plugin_id), lineage)


def sink_run(sink: Sink, ctx: SinkContext | None, log: SinkCommitLog, *, routes=None,
             decisions: SinkDecisions | None = None, door: SaveModeDoor | None = None,
             transaction_prefix: str = "txn-", staging_tag: str = "", save_modes_key: str = "") -> SinkRun:
    """One sink opened on the protocol. Without ``decisions`` (a tool, a test): files beside ``log``,
    which fence nothing; without ``door``: save-mode decisions among those too."""
    decisions = decisions if decisions is not None else FileDecisions(log)
    if not save_modes_key:
        # One run of a tool or test is its commit log: a key shared by every such run would say
        # "save modes made" for a target that no run of this log ever prepared.
        save_modes_key = "S_" + hashlib.sha1(os.path.abspath(log.root).encode()).hexdigest()[:16]
    door = door if door is not None else SaveModeDoor(decisions, save_modes_key)
    if ctx is not None:        # the run's once decisions are kept with its targets' save-mode decisions
        ctx = replace(ctx, decide_once=door.records.decide_once, checkpointed=log.latest_state,
                      transaction_prefix=transaction_prefix)
    return SinkRun(open_sink(sink, ctx, routes), log, decisions, door, transaction_prefix=transaction_prefix,
                   staging_tag=staging_tag, save_modes_key=save_modes_key)


def attempt_run(sink: Sink, ctx: SinkContext, log: SinkCommitLog, reporter, *, routes, job_id: str,
                pipeline_id: int, sink_index: int, lineage: str, origin: str, began: int | None = None,
                start_gate=None) -> SinkRun:
    """One sink of a pipeline opened as an attempt opens it: its decisions in the store, fenced by
    ``reporter``'s attempt; its targets' save modes under the job's shared records, those of the
    fresh start of incarnation ``began`` when one began the pipeline's lineage; ``start_gate``: the
    attempt's (``SaveModeDoor.start_gate``)."""
    prefix = f"T_{job_id}_{pipeline_id}_{sink_index}_{lineage}_"
    writer = {"pipeline": pipeline_id, "lineage": lineage}
    scope = f"P_{job_id}" if began is None else f"P_{job_id}~{began}"
    door = SaveModeDoor(StoreDecisions(reporter, JOB_RECORDS, TARGET_RECORDS, "P_", writer, run_scope=f"P_{job_id}",
                                       began=began), scope, start_gate)
    return sink_run(sink, ctx, log, routes=routes, decisions=StoreDecisions(reporter, pipeline_id, ctx.plugin_id, prefix),
                    door=door, transaction_prefix=prefix, staging_tag=str(reporter.attempt_id),
                    save_modes_key=f"S_{job_id}_{pipeline_id}_{sink_index}_{origin}")


class PipelineSinks:
    """Every sink of one pipeline of one attempt, opened and rolled forward at the pipeline's start."""

    def __init__(self, spark, pipeline, env, job_id: str, checkpoint_dir: str, reporter, stdout,
                 lineage: str, origin: str, routed: bool, job_sinks: tuple = (), start_gate=None):
        self.dir = checkpoint_dir
        self.lineage = lineage
        pipeline_id = pipeline.pipeline_id
        self.runs: dict[str, SinkRun] = {}
        self.reporter, self.pipeline_id = reporter, pipeline_id
        self._started: int | None = None     # the batch whose start is recorded (store/batch_starts.py)
        began = (read_json(os.path.join(checkpoint_dir, "seatide.json")) or {}).get("began")
        changes = next((b for s in pipeline.sources if (b := s.plugin.schema_change_behavior()) is not None), None)
        for sink in pipeline.sinks:
            ctx = SinkContext(spark=spark, job_id=job_id, pipeline_id=pipeline_id, plugin_id=sink.plugin_id,
                              micro_batch=env.micro_batch, unbounded=env.streaming, stdout=stdout,
                              checkpoints_retained=env.checkpoints_retained, fence=reporter.fence,
                              job_sinks=job_sinks, schema_changes=changes)
            run = attempt_run(sink.plugin, ctx, self.log(sink.plugin_id), reporter,
                              routes=sink.plugin.routes if routed else None, job_id=job_id, pipeline_id=pipeline_id,
                              sink_index=sink.index, lineage=lineage, origin=origin, began=began,
                              start_gate=start_gate)
            self.runs[sink.plugin_id] = run
            # Batches an earlier attempt decided but did not finish publishing (it crashed, or was
            # replaced just after its decision) are published before anything else runs.
            rolled = run.roll_forward()
            if rolled:
                log.info("pipeline %s sink %s: published decided batches %s", pipeline_id, sink.plugin_id, rolled)
        # A sink that commits in its own system leaves no decision in the store: the batch's start is its record
        self.records_starts = any(not run.targets.decided_in_store and run.targets.keeps_rows
                                  for run in self.runs.values())

    def write(self, plugin_id: str, frames, batch_id: int) -> BatchResult:
        """One sink's batch (``SinkRun.write``); before the batch's first sink write, its start is recorded."""
        if self.records_starts and self._started != batch_id:
            self.reporter.batch_started(self.pipeline_id, batch_id, self.lineage)
            self._started = batch_id
        return self.runs[plugin_id].write(frames, batch_id)

    def destroys_ahead(self) -> bool:
        return any(run.destroys_ahead() for run in self.runs.values())

    def check_ahead(self, sink_frames: list, others_destroy: bool) -> None:
        """Each sink's checks ahead (``SinkRun.check_ahead``); ``sink_frames``: (sink spec, its input:
        a DataFrame, or a routed sink's tables without rows, ``RoutedPipeline.fields_of``)."""
        for sink, frames in sink_frames:
            self.runs[sink.plugin_id].check_ahead(frames, others_destroy)

    def log(self, plugin_id: str) -> SinkCommitLog:
        return commit_log_of(self.dir, plugin_id, self.lineage)

    def end_of_data(self) -> None:
        for run in self.runs.values():
            run.end_of_data()

    def prune(self, keep_from: int) -> None:
        """Spark keeps checkpoint.retained batches recoverable; so do the sinks."""
        for run in self.runs.values():
            run.prune(keep_from)


def one_stream(sinks: list):
    """One streaming DataFrame for the pipeline's (sink, DataFrame) pairs, a query having one
    ``foreachBatch``: each sink's rows packed in a struct of its own (``each_sinks_rows`` takes
    them apart again in each batch)."""
    if len(sinks) == 1:
        return sinks[0][1]
    from pyspark.sql import functions as F

    tagged = [df.select(F.lit(i).alias(_SINK_TAG), F.struct(*[F.col(c) for c in df.columns]).alias(f"__p{i}"))
              for i, (_, df) in enumerate(sinks)]
    union = tagged[0]
    for other in tagged[1:]:
        union = union.unionByName(other, allowMissingColumns=True)
    return union


def each_sinks_rows(sinks: list, batch_df) -> list:
    """(sink, its rows) of one batch of ``one_stream(sinks)``."""
    if len(sinks) == 1:
        return [(sinks[0][0], batch_df)]
    return [(sink, batch_df.where(f"{_SINK_TAG} = {i}").select(f"__p{i}.*")) for i, (sink, _) in enumerate(sinks)]


__all__ = ["JOB_RECORDS", "PipelineSinks", "TARGET_RECORDS", "attempt_run", "each_sinks_rows", "one_stream", "sink_run"]
