"""A warm driver: a driver process started before its attempt exists.

    python -m seatide.runtime.driver warm --store URL --job-id ~~~~ --attempt 0000 --ready-fd N

It imports SeaTide and PySpark and builds a SparkSession with the default settings while
it waits, so the attempt it is given later skips the 7-10 s a cold driver spends there.
Once given its attempt it is an ordinary driver (``driver._drive``): same heartbeat,
self-fence, failpoints, reports and exit codes; and it exits after that one attempt.

The protocol with its worker (``worker/warm_pool.py``):

* stdout and stderr are one pipe the worker reads: into the worker's log while idle, into
  the attempt's log file (``store.paths.driver_log_path``) from the hand-over on. The
  worker owns the relay, so the JVM's output (it inherited the pipe at start) follows too.
* ``--ready-fd``: one byte ``R`` when the session is up; one byte ``A`` when an attempt was
  taken and the command line names it (below); one byte ``S`` once the attempt's first batch
  is committed: its start-up is over, and the worker may start the replacement warm driver
  without taking CPU from it (on 2 cores a JVM starting beside the attempt slowed its first
  batch 1.5-2x).
* stdin: one JSON line ``{"job_id", "attempt", "runtime_conf"}``, the attempt the worker
  claimed for us with the usual compare-and-set. End of file instead: the worker is gone
  or shrinks its pool; we exit 0.

The command line is how a process is known as an attempt's driver (``coordinator.service
.is_driver_of``, the fault tests' process watch). A warm driver starts with placeholder
values of fixed width after ``--job-id`` and ``--attempt`` and overwrites them in place,
in the memory the kernel shows as ``/proc/PID/cmdline``, before it acknowledges: from then
on it is that attempt's driver to everyone who looks.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger("seatide.driver")

# Job ids are at most 64 characters (store.jobs); "~" is not allowed in one, so an idle
# warm driver never looks like the driver of a real job.
JOB_ID_SLOT = "~" * 64
ATTEMPT_SLOT = "0" * 20
READY, TAKEN, STARTED = b"R", b"A", b"S"


def warm_session_conf() -> dict[str, str]:
    """The Spark settings of a job that sets none: what a warm session is built with."""
    from seatide.config.env import read_env
    from seatide.config.loader import spark_conf_for

    return spark_conf_for(read_env({}))


def placeholder_args() -> list[str]:
    return ["--job-id", JOB_ID_SLOT, "--attempt", ATTEMPT_SLOT]


def fits_command_line(job_id: str, attempt_id: int) -> bool:
    return len(job_id.encode()) <= len(JOB_ID_SLOT) and len(str(attempt_id)) <= len(ATTEMPT_SLOT)


def await_attempt(args) -> tuple[Future, Future] | None:
    """Warm up, then wait for the attempt. Fills ``args.job_id`` and ``args.attempt`` and returns
    the open store and the session (futures: they may still be starting), the session with the
    job's runtime settings applied; None if the worker closed our stdin without giving us an
    attempt."""
    taken = threading.Event()
    warming = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-up")
    store = warming.submit(_open_store, args.store)     # first: the attempt needs it first
    session = warming.submit(_warm_session)
    for future in (store, session):
        future.add_done_callback(lambda done: _warmed(done, args.ready_fd, taken, signal=done is session))
    log.info("warm driver pid %s: starting Spark, waiting for an attempt", os.getpid())
    line = sys.stdin.buffer.readline()
    if not line:
        log.info("warm driver pid %s: the worker closed the pool's pipe; exiting", os.getpid())
        return None
    taken.set()
    order = json.loads(line)
    args.job_id, args.attempt = order["job_id"], int(order["attempt"])
    name_attempt_in_command_line(args.job_id, args.attempt)
    _signal(args.ready_fd, TAKEN)
    log.info("warm driver pid %s takes job %s attempt %s (session %s)", os.getpid(), args.job_id,
             args.attempt, "ready" if session.done() else "still starting")
    return store, _with_runtime_conf(session, order.get("runtime_conf") or {})


def _open_store(store_url: str):
    """The state store, open and its schema checked (imports SQLAlchemy's schema and the
    migrations: about 1 s on a busy host), and a job config parsed and planned."""
    import seatide.runtime.pipeline_run  # noqa: F401  what run_attempt imports next
    from seatide.plan.warm_up import plan_sample_job
    from seatide.store.db import open_store

    store = open_store(store_url, wait_for_server=True)
    plan_sample_job()
    return store


def analyse_frames(spark, config, plan) -> None:
    """Build every pipeline's DataFrames as an attempt does, and run nothing: a warm driver's
    warm-up. Spark's analyzer runs interpreted the first times through a plan's shapes; the
    sample job's frames took 0.48 s the first time and 0.17 s the second."""
    from seatide.runtime.pipeline_run import PipelineRun

    for pipeline in plan.pipelines:
        run = PipelineRun(spark, pipeline, config.env, "seatide-warm-up", "", None, sys.stdout)
        run._frames()       # (the Sql transform drops the views it makes: none is left for the job)


def _warm_session():
    """A session with the default settings, and what every attempt's start pays once per
    process done already: a micro-batch pipeline run end to end in Spark."""
    from seatide.plan.warm_up import sample_job
    from seatide.runtime.session import build_session

    spark = build_session("seatide-warm-driver", warm_session_conf())
    try:
        _first_pipeline(spark)
        analyse_frames(spark, *sample_job())
    except Exception:      # a cold path for the attempt, not a reason to give up the session
        log.warning("warm driver pid %s: the warm-up query failed; the attempt pays its first "
                    "query itself", os.getpid(), exc_info=True)
    return spark


def _first_pipeline(spark) -> None:
    """A micro-batch pipeline as an attempt runs one: a Python data source read by a streaming
    query (Python workers, the streaming source runner), rows counted by an observation, a
    SQL transform over a temporary view, and each batch written as JSON and parquet files from
    ``foreachBatch`` (py4j's callback server, the writers' code paths). On a warm session an
    attempt's first batch then costs what its later ones do, not 2-4x more."""
    import shutil
    import tempfile

    from pyspark.sql import functions as F

    from seatide.connectors.fake.layout import SplitLayout
    from seatide.connectors.fake.split_stream import SOURCE_NAME, FakeSplitSource, stream_options
    from seatide.plugin.base import use_python_data_source

    use_python_data_source(spark, FakeSplitSource)     # registered once per session: the job's too
    # As many partitions as a job's source gets: each runs in a Python worker of its own, and
    # a worker started now is one the attempt's first batch need not start.
    partitions = spark.sparkContext.defaultParallelism
    layout = SplitLayout(readers=1, rows_per_reader=partitions, splits_per_reader=partitions, unit_rows=1)
    options = stream_options(layout, max_rows=partitions, unbounded=False, interval_ms=0, partitions=partitions)
    scratch = tempfile.mkdtemp(prefix="seatide-warm-")

    def write(frame, batch_id: int) -> None:
        frame.createOrReplaceTempView("seatide_warm_up")
        rows = frame.sparkSession.sql("select * from seatide_warm_up")
        for file_format in ("json", "parquet"):
            rows.write.mode("overwrite").format(file_format).save(os.path.join(scratch, file_format, str(batch_id)))

    try:
        frame = spark.readStream.format(SOURCE_NAME).options(**options).load()
        query = (frame.observe("seatide_warm_up_rows", F.count(F.lit(1)).alias("rows"))
                 .writeStream.foreachBatch(write).option("checkpointLocation", os.path.join(scratch, "spark"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        spark.catalog.dropTempView("seatide_warm_up")
        shutil.rmtree(scratch, ignore_errors=True)


def _warmed(done: Future, ready_fd: int | None, taken: threading.Event, signal: bool) -> None:
    """One warm-up step ended (the store; then the session, which makes us READY)."""
    if done.exception() is None:
        if signal:
            log.info("warm driver pid %s: Spark is ready", os.getpid())
            _signal(ready_fd, READY)
    elif not taken.is_set():
        # Idle and useless: exit, the worker starts another (with backoff). Once an attempt
        # is taken, the attempt sees the error from the future instead.
        log.error("warm driver pid %s: %s: %s", os.getpid(),
                  "Spark did not start" if signal else "the store did not open", done.exception())
        sys.stderr.flush()
        os._exit(1)


def signal_started_on_first_commit(args, reporter) -> None:
    """Tell the worker (``STARTED``) once the attempt's first batch is committed."""
    if args.ready_fd is None:
        return

    def wait() -> None:
        reporter.first_commit.wait()
        _signal(args.ready_fd, STARTED)

    threading.Thread(target=wait, name="warm-started", daemon=True).start()


def _signal(fd: int | None, byte: bytes) -> None:
    if fd is None:
        return
    try:
        os.write(fd, byte)
    except OSError:
        pass      # the worker is gone; PR_SET_PDEATHSIG ends us


def _with_runtime_conf(session: Future, conf: dict[str, str]) -> Future:
    """The session, once ``conf`` (settings a running session takes) is set on it."""
    configured: Future = Future()

    def apply(done: Future) -> None:
        try:
            spark = done.result()
            for key, value in conf.items():
                spark.conf.set(key, value)
            configured.set_result(spark)
        except BaseException as exc:
            configured.set_exception(exc)

    session.add_done_callback(apply)
    return configured


def name_attempt_in_command_line(job_id: str, attempt_id: int) -> None:
    """Write the attempt over the placeholders of our command line (/proc/self/cmdline).

    The kernel reads a process's command line from its own memory, between ``arg_start``
    and ``arg_end`` (fields 48 and 49 of /proc/self/stat); CPython copied argv at start
    and never reads that memory again, so it is ours to overwrite. Values shorter than a
    slot are padded with NUL bytes, which readers see as empty arguments after the value.
    """
    start, end = _argument_area()
    area = ctypes.string_at(start, end - start)
    for flag, slot, value in (("--job-id", JOB_ID_SLOT, job_id), ("--attempt", ATTEMPT_SLOT, str(attempt_id))):
        marker = f"\0{flag}\0{slot}\0".encode()
        at = area.find(marker)
        if at < 0 or len(value.encode()) > len(slot):
            raise RuntimeError(f"warm driver: no room for {flag} {value} in the command line")
        offset = at + len(flag) + 2
        ctypes.memmove(start + offset, value.encode().ljust(len(slot), b"\0"), len(slot))


def _argument_area() -> tuple[int, int]:
    with open("/proc/self/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()    # fields[0] is field 3, the state
    return int(fields[48 - 3]), int(fields[49 - 3])
