"""The PostgreSQL shapes check in one SparkSession (``cdc_shapes_pg`` describes the workload).

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_shapes_pg_check --seed 7 --transactions 200
                       [--merged] [--megabytes 0.05] [--shards 3] [--job]

The real Postgres-CDC source, the runtime's multi-table routing (``RoutedPipeline``: a small
batch collected on the driver, a large one written through Spark) and the Jdbc sink on the sink
protocol (``sink_runs.sink_run``), with crashes injected before a batch is written, inside the
sink before its database commit, and after that commit before the runtime recorded it
(``cdc_check``'s points); the query is started again from its
checkpoint. A job that fails on a shape the stream cannot carry must name it, and the check takes
the way out the message names. At the end every target must equal its source. ``--job`` runs the
same workload as a `seatide run` job whose driver is SIGKILLed (``cdc_shapes_pg_job``).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import secrets
import shutil
import tempfile
import time

from seatide.testing.cdc_check import Endpoint, InjectedCrash, postgres_endpoint
from seatide.testing.cdc_shapes_pg import (GONE, REFUSED, Shard, ShapesOutcome, ShapesWorkload, drop_database, job_text,
                                           shapes_database, source_rows, target_rows, until_equal)


def run_shapes_check(spark, admin: Endpoint, target: Endpoint, *, seed: int, transactions: int, workdir: str,
                     merged: bool = False, megabytes: float = 0.02, shards: int = 3,
                     deadline_s: float = 300.0) -> ShapesOutcome:
    """Run the workload on a fresh database of ``admin``'s server into ``target``; raise
    AssertionError unless every target ends equal to its source."""
    from seatide.connectors.postgres_cdc.tables import TableError
    from seatide.plugin.base import PermanentError

    rng, crashes = random.Random(seed), random.Random(seed + 1)
    workload = ShapesWorkload(rng, shards, megabytes)
    source = shapes_database(admin, seed)
    source.execute(*workload.setup())
    table, job_id = f"shapes_{seed}_{secrets.token_hex(3)}", f"shp{secrets.token_hex(3)}"
    conf = job_text(source.url, target.url, workload.shards, table, merged)
    outcome = ShapesOutcome(seed)
    runner = _Runner(spark, conf, job_id, workdir, crashes, outcome)

    def start():
        while True:
            try:
                return runner.start()
            except (PermanentError, TableError) as exc:
                refused = next((s for s in workload.shards if f"public.{s.name}" in str(exc)), None)
                if REFUSED not in str(exc) or refused is None or not refused.misfit:
                    raise AssertionError(f"seed {seed}: the job refused to start: {exc}") from None
                outcome.way_outs.append("identity")            # the way out it names
                source.execute(f"ALTER TABLE {refused.name} REPLICA IDENTITY FULL")

    def restart_if_dead():
        restart_or_take_the_way_out(running, runner, GONE, lambda: target.execute(*[f"DELETE FROM {name}"
                                                                                  for name in targets]), start)

    def rows():
        return target_rows(target, workload.shards, table, merged), source_rows(source, workload.shards, merged)

    targets = [table] if merged else [f"{table}_{s.name}" for s in workload.shards]
    running = [start()]             # the query now (a crash or a way out starts another)
    try:
        write_while_streaming(workload, source, outcome, rng, transactions, deadline_s, restart_if_dead)
        until_equal(rows, deadline_s, f"seed {seed} ({outcome})", restart_if_dead)
        return outcome
    finally:
        running[0].stop()
        runner.start_over()
        for name in targets:
            target.execute(f"DROP TABLE IF EXISTS {name}")
        drop_database(admin, source)
        shutil.rmtree(workdir, ignore_errors=True)


def restart_or_take_the_way_out(running: list, runner: "_Runner", gone: tuple, empty_targets, start) -> None:
    """Start the query (``running[0]``) again if it died: after an injected crash as it was; after a
    failure naming a shape the stream cannot carry (one of ``gone``) and the way out ("submit it
    again"), by that way out (``empty_targets()``, a fresh checkpoint); any other failure fails the
    check."""
    from seatide.plugin.evolution import schema_change_in

    if running[0].isActive:
        return
    error = str(running[0].exception() or "")
    running[0].stop()
    change = schema_change_in(error)
    if change is not None:          # as the driver does (pipeline_run._restart_for): the new shape's query
        runner.outcome.schema_changes += 1
        runner.seen = {change["table"]: change.get("seen")}
    elif "injected crash" not in error:
        reason = next(filter(None, (_way_out(g, error) for g in gone)), None)
        if reason is None or "submit it again" not in error:
            raise AssertionError(f"seed {runner.outcome.seed}: the CDC stream failed: {error[-3000:]}")
        runner.outcome.way_outs.append(reason)
        empty_targets()
        runner.start_over()
    running[0] = start()


def _way_out(gone, error: str) -> str | None:
    """The reason ``error`` fails for, if it is one of ``gone``: a phrase in it, or a pattern that
    matches SeaTide's refusal whole (its group ``reason``)."""
    if isinstance(gone, re.Pattern):
        found = gone.search(error)
        return found.group("reason") if found else None
    return gone if gone in error else None


def write_while_streaming(workload, source: Endpoint, outcome: ShapesOutcome, rng, transactions: int,
                          deadline_s: float, restart_if_dead, between=lambda: None) -> None:
    """Write ``transactions`` of ``workload`` to ``source`` a few at a time, each few followed by a
    written batch (``restart_if_dead()`` while waiting: a crash or a way out starts the query again)
    and then ``between()`` (a resume with a changed config...)."""
    while outcome.transactions < transactions:
        written = outcome.batches
        for _ in range(min(rng.randint(1, 8), transactions - outcome.transactions)):
            statements = workload.transaction()
            source.execute(*statements)
            outcome.transactions += 1
            outcome.statements += len(statements)
        deadline = time.monotonic() + deadline_s
        while outcome.batches <= written:
            restart_if_dead()
            if time.monotonic() > deadline:
                raise AssertionError(f"seed {outcome.seed}: no batch written for {deadline_s} s ({outcome})")
            time.sleep(0.05)
        between()


def run_script(spark, admin: Endpoint, target: Endpoint, *, shards: list[Shard], setup: list, script: list[list],
               workdir: str, merged: bool = False, crashes: tuple = (), deadline_s: float = 300.0,
               sink_options: str = "") -> ShapesOutcome:
    """A directed run: ``setup`` on a fresh database, the snapshot, then each transaction of
    ``script``; the n-th batch that holds rows meets the n-th of ``crashes`` (a crash point of
    ``cdc_check``, or None). Raises AssertionError unless every target ends equal to its source."""
    source = shapes_database(admin, 0)
    source.execute(*setup)
    table, job_id = f"shapes_{secrets.token_hex(3)}", f"shp{secrets.token_hex(3)}"
    outcome = ShapesOutcome(0)
    runner = _Runner(spark, job_text(source.url, target.url, shards, table, merged, sink_options), job_id, workdir,
                     _Scripted(list(crashes)), outcome)

    def restart_if_crashed():
        if not running[0].isActive:
            error = str(running[0].exception() or "")
            if "injected crash" not in error:
                raise AssertionError(f"the CDC stream failed: {error[-3000:]}")
            running[0].stop()
            running[0] = runner.start()

    running = [runner.start()]
    try:
        for step, transaction in enumerate([[], *script]):
            source.execute(*transaction)
            until_equal(lambda: (target_rows(target, shards, table, merged), source_rows(source, shards, merged)),
                        deadline_s, f"step {step} ({outcome})", restart_if_crashed)
        return outcome
    finally:
        running[0].stop()
        runner.start_over()
        for name in ([table] if merged else [f"{table}_{s.name}" for s in shards]):
            target.execute(f"DROP TABLE IF EXISTS {name}")
        drop_database(admin, source)


class _Scripted:
    """Crash points in a fixed order (then none), where ``_Runner`` draws them at random."""

    def __init__(self, points: list):
        self.points = points

    def choice(self, _options):
        return self.points.pop(0) if self.points else None


class _Runner:
    """Starts the query as a driver's pipeline does (RoutedPipeline, the sink opened on the sink
    protocol: ``sink_runs.sink_run``), with ``cdc_check``'s crash points."""

    def __init__(self, spark, conf: str, job_id: str, workdir: str, crashes, outcome: ShapesOutcome,
                 holds_rows=None):
        self.spark, self.conf, self.job_id, self.workdir = spark, conf, job_id, workdir
        self.crashes, self.outcome = crashes, outcome
        # whether a batch's end offset holds rows (crashes meet those); None: Postgres-CDC's offsets
        self.holds_rows = holds_rows or (lambda end: end.get("splits") or end.get("changes", 0) > 0)
        self.lineage, self.crash, self.plugin = 0, None, None
        self.seen = None        # a changed table's shape as the stream showed it (schema evolution)

    def start_over(self) -> None:
        """A fresh checkpoint (a new lineage) and no slot: as a job submitted again starts."""
        self.lineage += 1
        if self.plugin is not None:
            self.plugin.release(self.job_id)

    def start(self):
        from seatide.config.loader import load_job_text
        from seatide.plan.dag import build_plan
        from seatide.plugin.base import ReadContext, SinkContext
        from seatide.runtime import schema_evolution
        from seatide.runtime.commit_log import FileDecisions, SinkCommitLog
        from seatide.runtime.offset_log import batch_offsets
        from seatide.runtime.sink_runs import sink_run
        from seatide.runtime.table_routing import RoutedPipeline

        runner, outcome = self, self.outcome
        pipeline = build_plan(load_job_text(self.conf)).pipelines[0]
        self.plugin, sink = pipeline.sources[0].plugin, pipeline.sinks[0]
        checkpoint = os.path.join(self.workdir, f"{self.job_id}-{self.lineage}")
        ctx = ReadContext(self.spark, micro_batch=True, unbounded=True, parallelism=2, max_rows_per_batch=60,
                          read_interval_ms=200, plugin_id=pipeline.sources[0].plugin_id, job_id=self.job_id,
                          pipeline_id=0, known_tables=schema_evolution.known_shapes(checkpoint), seen=self.seen)
        routed = RoutedPipeline(self.spark, pipeline, ctx)
        stream = routed.read()
        spark_dir = os.path.join(checkpoint, "spark")

        class Decisions(FileDecisions):
            def fence(self) -> None:        # a batch's first fence comes before its database commit
                if runner.crash == "before_commit":
                    runner.crash = None
                    outcome.crashes += 1
                    raise InjectedCrash("injected crash before_commit")

        class Log(SinkCommitLog):
            def commit(self, batch_id: int, state: dict) -> None:   # after the database commit
                if runner.crash == "after_commit":
                    runner.crash = None
                    outcome.crashes += 1
                    raise InjectedCrash("injected crash after_commit")
                super().commit(batch_id, state)

        log = Log(os.path.join(checkpoint, "sink"))
        run = sink_run(sink.plugin, SinkContext(self.spark, self.job_id, 0, sink.plugin_id, True, True, io.StringIO()),
                       log, routes=sink.plugin.routes, decisions=Decisions(log),
                       transaction_prefix=f"T_{self.job_id}_0_0_L{self.lineage}_")
        run.roll_forward()
        # the tables' changes since the shapes kept with the checkpoint, to the sink before any row
        # of a new shape (pipeline_run.start; a no-op for sources that follow no changes)
        schema_evolution.evolve(checkpoint, [self.plugin], [run])
        self.seen = None

        def each_batch(batch_df, batch_id):
            offsets = batch_offsets(spark_dir, batch_id)
            # crashes meet batches that hold rows (the stream also moves past other tables' WAL)
            holds_rows = runner.holds_rows(offsets.end)
            runner.crash = runner.crashes.choice(["before_write", "before_commit", "after_commit"] + [None] * 9) \
                if holds_rows else None
            if runner.crash == "before_write":
                outcome.crashes += 1
                raise InjectedCrash("injected crash before_write")
            rows = routed.rows(batch_df, offsets)
            try:
                run.write(routed.frames(rows, sink), batch_id)
            finally:
                routed.release(rows)
            outcome.batches += 1

        return (stream.writeStream.foreachBatch(each_batch).option("checkpointLocation", spark_dir)
                .trigger(processingTime="200 milliseconds").start())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--merged", action="store_true", help="every shard into one target table")
    parser.add_argument("--megabytes", type=float, default=0.02, help="share of documents of about 1 MB")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--job", action="store_true", help="a `seatide run` job whose driver is SIGKILLed")
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    from seatide.testing.servers import PrivatePostgres

    server = PrivatePostgres().start()
    try:
        admin, target = postgres_endpoint(server.port, "postgres"), postgres_endpoint(5432, "test")
        options = dict(seed=args.seed, transactions=args.transactions, merged=args.merged, megabytes=args.megabytes,
                       shards=args.shards, workdir=tempfile.mkdtemp(prefix="cdc-shapes-"))
        if args.job:
            from seatide.testing.cdc_shapes_pg_job import run_shapes_job_check

            outcome = run_shapes_job_check(admin, target, kills=args.kills, **options)
        else:
            from seatide.runtime.session import build_session

            spark = build_session("seatide-cdc-shapes", {"spark.master": "local[2]"})
            try:
                outcome = run_shapes_check(spark, admin, target, **options)
            finally:
                spark.stop()
        print(f"postgres shapes -> postgres ({'merged' if args.merged else 'a target each'}): targets equal "
              f"sources; {outcome}", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
