"""How one pipeline's DataFrames are built: each source read (its rows counted as they pass),
each transform applied, each sink's input made; a multi-table pipeline read once and routed.

A mixin of ``PipelineRun``, apart from it because building the frames is one step (a warm
driver runs only this one, ``warm_driver.analyse_frames``) and running them another: the query, its
batches and the stops. It reads the run's ``spark``, ``pipeline``, ``env``, ``job_id``,
``spark_dir`` and the tables' shapes kept with the checkpoint.
"""

from __future__ import annotations

from seatide.plugin.base import ReadContext, TransformContext
from seatide.runtime import change_order
from seatide.runtime.offset_log import logs_a_batch
from seatide.runtime.table_routing import RoutedPipeline


class PipelineFrames:
    def _read_ctx(self, spec) -> ReadContext:
        env = self.env
        return ReadContext(spark=self.spark, micro_batch=env.micro_batch, unbounded=env.streaming,
                           parallelism=spec.plugin.parallelism, max_rows_per_batch=env.micro_batch_max_rows,
                           read_interval_ms=env.trigger_interval_ms, plugin_id=spec.plugin_id,
                           job_id=self.job_id, pipeline_id=self.pipeline.pipeline_id,
                           known_tables=self._known, seen=self._seen,
                           expand_batches=self.pipeline.routed(env.micro_batch),
                           resuming=env.micro_batch and logs_a_batch(self.spark_dir))

    def _frames(self) -> list[tuple[object, object]]:
        """(sink spec, DataFrame it writes) for each sink of the pipeline. A multi-table pipeline
        reads its source once; every sink gets that one frame, taken apart per batch."""
        if self.pipeline.routed(self.env.micro_batch):
            self.routed = RoutedPipeline(self.spark, self.pipeline, self._read_ctx(self.pipeline.sources[0]))
            stream = self.routed.read()
            return [(sink, stream) for sink in self.pipeline.sinks]
        micro = self.env.micro_batch
        # Rows read from Spark's own count of the source's scan (``_report_progress``) only where
        # that count is the source's rows: one source, nothing between it and one sink that
        # runs the batch once. A transform's filter is pushed into the scan and shrinks the
        # count; a second sink or a self-union scans it twice. Elsewhere each source is observed.
        pipeline = self.pipeline
        self._spark_counts_rows = (micro and len(pipeline.sources) == 1 and not pipeline.transforms
                                   and len(pipeline.sinks) == 1 and pipeline.sources[0].plugin.counted_by_spark()
                                   and pipeline.sinks[0].plugin.writes_in_one_pass)
        frames: dict[str, object] = {}
        outputs: dict[str, str] = {}
        for spec in self.pipeline.sources:
            ctx = self._read_ctx(spec)
            planned = spec.plugin.planned_rows(ctx) if not micro else None
            if self._spark_counts_rows:
                frames[spec.plugin_id] = spec.plugin.read(ctx)
            elif planned is None:
                frames[spec.plugin_id] = self._observed(spec.plugin.read(ctx))
            else:
                frames[spec.plugin_id] = spec.plugin.read(ctx)
                self._planned_rows += planned
            frames[spec.plugin_id] = change_order.number_changes(frames[spec.plugin_id], spec.plugin)
            outputs[spec.plugin_id] = spec.output or spec.name
        for spec in self.pipeline.transforms:
            upstream = self.pipeline.inputs[spec.plugin_id][0]
            ctx = TransformContext(spark=self.spark, input_name=outputs[upstream],
                                   output_name=spec.output or spec.name, micro_batch=micro)
            frames[spec.plugin_id] = spec.plugin.apply(frames[upstream], ctx)
            outputs[spec.plugin_id] = spec.output or spec.name
        result = []
        for sink in self.pipeline.sinks:
            inputs = [frames[i] for i in self.pipeline.inputs[sink.plugin_id]]
            df = inputs[0]
            for other in inputs[1:]:
                df = df.unionByName(other)
            change_order.check_order_reaches(df, self.pipeline, sink, frames)
            result.append((sink, change_order.for_sink(df, sink.plugin)))
        return result

    def _observed(self, df):
        """Count a source's rows as they pass, in the same pass that moves them.

        Spark's numInputRows would count what the source's reader returned (FakeSource
        returns split descriptors, not rows); a named observation counts the rows.
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        name = f"seatide_rows_read_{self.pipeline.pipeline_id}_{len(self._observations)}"
        if self.env.micro_batch:   # reported per micro-batch in the query's progress
            self._observations.append(name)
            return df.observe(name, F.count(F.lit(1)).alias("rows"))
        observation = Observation(name)
        self._observations.append(observation)
        return df.observe(observation, F.count(F.lit(1)).alias("rows"))
