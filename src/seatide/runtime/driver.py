"""The Spark driver: one process per attempt of one job.

    python -m seatide.runtime.driver driver --store URL --job-id J --attempt A

It reads its job and attempt from the store, heartbeats from its first second, runs
every pipeline that has not already ended (each as its own Spark query, concurrently),
records each committed batch, end of data and pipeline end the moment it happens, and
exits 0 when every pipeline has ended, 1 when the attempt failed and may be retried.

    python -m seatide.runtime.driver warm --store URL ... --ready-fd N

starts a warm driver instead (runtime/warm_driver.py): it starts Spark first and is given
its attempt later by its worker, then runs it exactly as above.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import threading
import time
from typing import TextIO

from seatide import failpoints
from seatide.store.states import PIPELINE_TERMINAL, PipelineStatus
from seatide.timeouts import Timeouts

log = logging.getLogger("seatide.driver")

EXIT_OK, EXIT_FAILED = 0, 1


def run_attempt(spark, store, job_id: str, attempt_id: int, heartbeat, stdout: TextIO = sys.stdout,
                poll_interval: float = 0.2) -> int:
    """Run the attempt's unfinished pipelines in ``spark`` until each has ended."""
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan
    from seatide.runtime.pipeline_run import PipelineRun
    from seatide.runtime.pipeline_start import start_pipelines
    from seatide.runtime.progress import GroupProgress, ProgressSampler, TaskProgress
    from seatide.store.jobs import job_view
    from seatide.store.runs import run_key

    reporter = heartbeat.reporter
    view = reporter.read(lambda conn: job_view(conn, job_id))
    job = view.job
    config = load_job_text(job.config, json.loads(job.variables), source_name=f"job {job_id}")
    plan = build_plan(config)
    # done already by a driver process (``_drive``, while Spark started): found done, no work
    prepare_checkpoints(reporter, view)
    job_sinks = tuple(sink.plugin for pipeline in plan.pipelines for sink in pipeline.sinks)
    runs = []
    for row in view.pipelines:
        if row.status in PIPELINE_TERMINAL:
            log.info("pipeline %s already %s; skipped", row.pipeline_id, row.status)
            continue
        # Names a pipeline gives outside the store (slots, sink transaction ids) are the run's.
        run = PipelineRun(spark, plan.pipeline(row.pipeline_id), config.env, run_key(job_id, job.run_id),
                          row.checkpoint_dir, reporter, stdout, job_sinks)
        runs.append(run)
    runs = start_pipelines(runs, heartbeat)
    # Each pipeline's own tasks too: the leader judges each pipeline (issue 30, finding 10).
    progress = ProgressSampler(TaskProgress(spark), reporter.task_progress, groups=GroupProgress(spark),
                               pipeline_groups=lambda: {run.pipeline.pipeline_id: group for run in runs
                                                        if (group := run.job_group()) is not None})
    progress.begin()
    return _supervise(runs, reporter, heartbeat, poll_interval, progress)


def prepare_checkpoints(reporter, view) -> None:
    """What the resume decided for each unfinished pipeline's checkpoint (``view``: the job's
    ``job_view``). Needs no Spark: a driver does it while its JVM starts, so a savepoint's copy
    overlaps that start, and an attempt killed during it has not spent a whole JVM start first."""
    restore = json.loads(view.job.restore or "{}")
    prepare = restore.get("prepare", {})
    began = fresh_began(restore)
    for row in view.pipelines:
        if row.status not in PIPELINE_TERMINAL and str(row.pipeline_id) in prepare:
            _prepare_checkpoint(reporter, row, view.job.incarnation, prepare[str(row.pipeline_id)],
                                began.get(row.pipeline_id))


def fresh_began(restore: dict) -> dict[int, int]:
    """The incarnation whose resume decided each carried fresh start (``jobs.restore``'s ``fresh``)."""
    return {entry["pipeline"]: entry["began"] for entry in restore.get("fresh", []) if "began" in entry}


def _prepare_checkpoint(reporter, row, incarnation: int, source: str | None, began: int | None = None) -> None:
    """What the resume decided for this pipeline's checkpoint, done now (once per incarnation)."""
    from seatide.runtime.checkpoint_move import prepare_checkpoint

    reporter.fence()      # only the current attempt copies and moves checkpoint directories...
    # ...and the move itself is fenced again, under the run's move lock (checkpoint_move.py)
    done = prepare_checkpoint(row.checkpoint_dir, incarnation, source, reporter.attempt_id, reporter.fence, began)
    if done is not None:
        log.info("pipeline %s: checkpoint %s (old one set aside as %s)", row.pipeline_id,
                 f"restored from {source}" if source else "started over", done["set_aside"])
        reporter.checkpoint_prepared(row.pipeline_id, **done)


def stop_in_parallel(runs, mode: str) -> None:
    """Ask every pipeline to stop at once: each waits for its running micro-batch to commit,
    so one after another would take their sum, and a job with many pipelines would outlast
    the cancel grace and be killed mid-batch."""
    waiting = [run for run in runs if not run.stop_requested]
    threads = [threading.Thread(target=run.request_stop, args=(mode,), daemon=True,
                                name=f"stop-pipeline-{run.pipeline.pipeline_id}") for run in waiting]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _supervise(runs, reporter, heartbeat, poll_interval: float, progress) -> int:
    """Poll the pipelines until each has ended; pass on stop requests; record how each ended.

    Each round also samples Spark's task progress: the heartbeat thread proves the driver
    lives, this loop proves its work moves (a stuck loop is as hung as a stuck task)."""
    retryable_error = None
    pending = list(runs)
    savepointed = []
    while pending:
        progress.sample()
        desired = heartbeat.desired
        if desired in ("CANCEL", "SAVEPOINT") or retryable_error:
            stop_in_parallel(pending, "CANCEL" if retryable_error else desired)
        for run in list(pending):
            outcome = run.poll()
            if outcome.status == PipelineStatus.RUNNING:
                continue
            pending.remove(run)
            pipeline_id = run.pipeline.pipeline_id
            if outcome.status == PipelineStatus.FAILED and not outcome.permanent:
                retryable_error = retryable_error or f"pipeline {pipeline_id}: {outcome.error}"
            elif outcome.status == PipelineStatus.FAILED:
                reporter.pipeline_status(pipeline_id, PipelineStatus.FAILED, outcome.error)
                stop_in_parallel(pending, "CANCEL")   # the job will be FAILED: stop the rest now
            elif outcome.status == PipelineStatus.SAVEPOINT_DONE and not retryable_error:
                savepointed.append(run)    # recorded together, once every pipeline has stopped
            elif outcome.status == PipelineStatus.CANCELED and not retryable_error:
                reporter.pipeline_status(pipeline_id, PipelineStatus.CANCELED)
        if pending:
            time.sleep(poll_interval)
    if retryable_error:
        reporter.end_attempt(succeeded=False, error=retryable_error)
        return EXIT_FAILED
    if savepointed:
        _take_savepoint(savepointed, reporter)
    reporter.end_attempt(succeeded=True)
    return EXIT_OK


def _take_savepoint(runs, reporter) -> None:
    """Every stopped pipeline's checkpoint, copied under one savepoint id, then SAVEPOINT_DONE."""
    from seatide.runtime.spark_checkpoint import copy_pipeline_directory, restore_point
    from seatide.store.restore import savepoint_dir

    # a batch the store recorded before Spark's commit log took it (a stop that interrupted the
    # query in between) is in the copy: its sinks' marks are
    batches = {run.pipeline.pipeline_id: restore_point(run.spark_dir, reporter.recorded_batch(run.pipeline.pipeline_id))
               for run in runs}

    def copy(savepoint_id: int) -> None:
        failpoints.hit("driver.savepoint_copy")
        for run in runs:
            target = savepoint_dir(run.dir, savepoint_id)
            shutil.rmtree(target, ignore_errors=True)
            copy_pipeline_directory(run.dir, target)

    savepoint_id = reporter.savepoint({k: (-1 if v is None else v) for k, v in batches.items()}, copy)
    log.info("savepoint %s taken of pipelines %s", savepoint_id, sorted(batches))
    for run in runs:
        reporter.pipeline_status(run.pipeline.pipeline_id, PipelineStatus.SAVEPOINT_DONE)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="seatide driver")
    parser.add_argument("role", choices=["driver", "warm"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--heartbeat-interval", type=float, default=Timeouts.driver_heartbeat_interval)
    parser.add_argument("--self-fence-after", type=float, default=Timeouts.driver_self_fence_after)
    parser.add_argument("--ready-fd", type=int, default=None, help="warm drivers: tell the worker here")
    return parser.parse_args(argv)


def _start_session_early(app_name: str):
    """Start Spark (~7 s) in a thread while the driver reads its job; None if the worker gave no conf."""
    from seatide.runtime.session import SPARK_CONF_ENV

    conf = os.environ.get(SPARK_CONF_ENV)
    return _start_session(app_name, json.loads(conf)) if conf else None


def _start_session(app_name: str, conf: dict):
    """Spark starting in a thread (a future): ``await_session`` waits for it, cancel-aware."""
    from concurrent.futures import ThreadPoolExecutor

    from seatide.runtime.session import build_session

    return ThreadPoolExecutor(max_workers=1).submit(build_session, app_name, conf)


def await_session(early_session, heartbeat, poll: float = 0.2):
    """The session started early, or None if the job is canceled before it is up: starting
    Spark takes seconds (a minute on a loaded host) that a canceled attempt need not wait."""
    from concurrent.futures import TimeoutError as NotYet

    while True:
        try:
            return early_session.result(timeout=poll)
        except NotYet:
            if early_session.done():     # the start itself raised TimeoutError (NotYet is the builtin)
                raise
            if heartbeat.desired == "CANCEL":
                return None


def _mask_logs(job) -> frozenset[str]:
    """The job's secret values, masked from here on in every line this driver logs."""
    from seatide.secrets import MaskingFilter, secret_values

    secrets = secret_values(job.config, json.loads(job.variables))
    for handler in logging.getLogger().handlers:
        handler.addFilter(MaskingFilter(secrets))
    return secrets


def main(argv: list[str] | None = None) -> None:
    args = _parse(sys.argv[1:] if argv is None else argv)
    code = EXIT_FAILED
    try:
        warm = None
        if args.role == "warm":
            _configure_logging()
            from seatide.runtime.warm_driver import await_attempt
            warm = await_attempt(args)
            if warm is None:
                code = EXIT_OK
                return
        code = _drive(args, *(warm or ()))
    except BaseException:
        log.exception("driver of attempt %s failed", args.attempt)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Exit for certain, on every path: Spark's non-daemon threads (and a JVM that is
        # stuck) must not keep a driver alive after it has reported its end.
        os._exit(code)


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _drive(args, warm_store=None, warm_session=None) -> int:
    """Run the attempt; ``warm_store``, ``warm_session``: a warm driver's (futures), else open
    the store and start a session now."""
    _configure_logging()
    early_session = warm_session or _start_session_early(f"seatide-{args.job_id}")
    from seatide.runtime.data_ends import end_pipelines_whose_data_ended
    from seatide.runtime.heartbeat import FENCED_EXIT_CODE, Heartbeat
    from seatide.runtime.reporter import AttemptReporter
    from seatide.runtime.warm_driver import signal_started_on_first_commit
    from seatide.store.db import AttemptFenced, open_store
    from seatide.store.jobs import load_job
    from seatide.store.sessions import again_on_new_session

    store = warm_store.result() if warm_store is not None else open_store(args.store, wait_for_server=True)

    def read_job():
        with store.read() as conn:
            return load_job(conn, args.job_id)
    job = again_on_new_session(read_job, what="driver reading its job", within=args.self_fence_after)
    if job is None:
        log.error("job %s does not exist", args.job_id)
        return FENCED_EXIT_CODE
    secrets = _mask_logs(job)
    reporter = AttemptReporter(store, args.job_id, job.incarnation, args.attempt, secrets)
    try:
        reporter.mark_running(os.getpid())
    except AttemptFenced as exc:
        log.error("%s", exc)
        return FENCED_EXIT_CODE
    heartbeat = Heartbeat(reporter, args.heartbeat_interval, args.self_fence_after).start()
    signal_started_on_first_commit(args, reporter)
    failpoints.hit("driver.after_first_heartbeat")
    code = EXIT_FAILED
    try:
        if end_pipelines_whose_data_ended(reporter, args.job_id, heartbeat.desired):
            log.info("attempt %s: every pipeline's data was committed by an earlier attempt; ended without Spark",
                     args.attempt)
            reporter.end_attempt(succeeded=True)
            return EXIT_OK
        if heartbeat.desired != "CANCEL":      # canceled: left for the next incarnation, as before
            from seatide.store.jobs import job_view
            prepare_checkpoints(reporter, reporter.read(lambda conn: job_view(conn, args.job_id)))
        if early_session is None:       # none given (hinted, or a config error): started now, as cancelable
            from seatide.config.loader import load_job_env, spark_conf_for
            early_session = _start_session(f"seatide-{args.job_id}",
                                           spark_conf_for(load_job_env(job.config, json.loads(job.variables))))
        spark = await_session(early_session, heartbeat)
        if spark is None:
            log.info("attempt %s: job canceled while Spark started; no query started", args.attempt)
            reporter.end_attempt(succeeded=True)
            return EXIT_OK
        code = run_attempt(spark, store, args.job_id, args.attempt, heartbeat)
    except AttemptFenced as exc:
        log.error("%s", exc)
        code = FENCED_EXIT_CODE
    except Exception as exc:
        log.exception("attempt %s failed", args.attempt)
        try:
            reporter.end_attempt(succeeded=False, error=f"{type(exc).__name__}: {exc}"[:4000])
        except Exception:
            log.exception("attempt %s: its failure could not be recorded; the worker will", args.attempt)
    finally:
        heartbeat.stop()
    return code


if __name__ == "__main__":
    main()
