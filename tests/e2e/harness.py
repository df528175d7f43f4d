"""Run real jobs in the shared SparkSession, through the real control-plane code.

A job is submitted to a real SQLite store; a real ``Coordinator`` (driven tick by tick
here instead of by its thread) schedules it on a registered worker node; the attempt is
claimed as a worker claims it; and the driver's own ``run_attempt`` runs it in this
process's SparkSession. Only the process boundary is skipped, so these tests share the
session's start-up cost. (Process-level behaviour is covered in tests/cluster.)
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass

from sqlalchemy import select

from seatide import intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.runtime.driver import run_attempt
from seatide.runtime.heartbeat import Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.runtime.session import activate_session
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import AttemptFenced, open_store
from seatide.store.states import JOB_TERMINAL
from seatide.testing.attempt_watch import AttemptWatch
from seatide.timeouts import Timeouts
from seatide.worker.agent import Worker

WORKER = "in-process-worker"


class Fenced(Exception):
    pass


def _raise_fenced() -> None:
    raise Fenced("attempt fenced")


@dataclass
class JobRun:
    job_id: str
    status: str
    error: str | None
    exit_codes: list[int]
    stdout: str
    store: object

    def job(self):
        with self.store.read() as conn:
            return conn.execute(select(s.jobs).where(s.jobs.c.job_id == self.job_id)).first()

    def pipelines(self) -> list:
        with self.store.read() as conn:
            return list(conn.execute(select(s.pipelines).where(s.pipelines.c.job_id == self.job_id)
                                     .order_by(s.pipelines.c.pipeline_id)))

    def checkpoints(self) -> list:
        with self.store.read() as conn:
            return list(conn.execute(select(s.checkpoints).where(s.checkpoints.c.job_id == self.job_id)
                                     .order_by(s.checkpoints.c.checkpoint_id)))

    def attempts(self) -> list:
        with self.store.read() as conn:
            return list(conn.execute(select(s.attempts).where(s.attempts.c.job_id == self.job_id)))


# One Python process here is the leader, the worker, the driver with its heartbeat and the test's
# own threads, where a cluster has a process each. Under a CPU hog (load 11-17 on two cores) it got
# a fraction of the CPU those processes get, and its driver's SQLite heartbeat went 10 s without
# landing: the leader gave a healthy attempt up mid-savepoint (stop 56's hog run). The driver's
# windows are wider here; no test of this harness is about them, and the cluster tests keep the
# shipped ones. A test that judges a hang or a cancel passes its own.
IN_PROCESS = Timeouts(driver_self_fence_after=18.0, driver_hung_after=30.0, worker_lost_after=30.0).check()


class InProcessCluster:
    """``driver_thread``: run each attempt on a thread of its own, where no SparkSession is active,
    as a driver process runs it (it builds its session on another thread while it reads the job).
    Spark plans a query under the session's SQL settings only on a thread where the session is
    active; elsewhere it falls back to the defaults (TIME off, the JVM's time zone)."""

    def __init__(self, spark, data_dir: str, driver_thread: bool = False, timeouts: Timeouts | None = None):
        self.spark = spark
        self.data_dir = data_dir
        self.driver_thread = driver_thread
        self.store = open_store(default_store_url(data_dir))
        self.timeouts = timeouts or IN_PROCESS
        self.coordinator = Coordinator(self.store, node_id="in-process-coordinator", timeouts=self.timeouts)
        # The real worker's claim and reaping; only the launch differs (the driver runs here).
        self.worker = Worker(self.store, default_store_url(data_dir), data_dir, node_id=WORKER, slots=4)
        register_node(self.store, WORKER, "worker", slots=4)

    def _tick(self) -> None:
        from seatide.coordinator.service import node_heartbeat

        node_heartbeat(self.store, WORKER)
        assert self.coordinator.lease.tick()
        self.coordinator.reconcile_all()

    def _watch_tick(self) -> None:
        """The leader's tick while an attempt runs: a tick that lost the lease (a slow store step
        on a loaded host) takes it again at the next one, as a coordinator's loop does."""
        from seatide.coordinator.service import node_heartbeat

        node_heartbeat(self.store, WORKER)
        if self.coordinator.lease.tick():
            self.coordinator.reconcile_all()

    def submit(self, text: str, variables: dict | None = None, job_id: str | None = None) -> str:
        return intents.submit(self.store, self.data_dir, text=text, variables=variables, job_id=job_id,
                              actor="test").job_id

    def run(self, text: str, variables: dict | None = None, job_id: str | None = None,
            max_attempts: int = 5, before_attempt=None, stop_after=None) -> JobRun:
        """Submit and run to a terminal status; ``stop_after(store, job_id)`` may request a stop."""
        job_id = self.submit(text, variables, job_id)
        return self.drive(job_id, max_attempts, before_attempt, stop_after)

    def drive(self, job_id: str, max_attempts: int = 5, before_attempt=None, stop_after=None) -> JobRun:
        out = io.StringIO()
        codes = []
        deadline = time.time() + 600
        while time.time() < deadline:
            self._tick()
            job = self._job(job_id)
            if job.status in JOB_TERMINAL:
                return JobRun(job_id, job.status, job.error_msg, codes, out.getvalue(), self.store)
            attempt = self._claim(job_id)
            if attempt is None:
                time.sleep(0.2)
                continue
            assert len(codes) < max_attempts, f"more than {max_attempts} attempts"
            if before_attempt is not None:
                before_attempt(attempt)
            codes.append(self._run_attempt(job, attempt, out, stop_after))
        raise AssertionError(f"job {job_id} did not end")

    def events(self, job_id: str) -> list:
        with self.store.read() as conn:
            return list(conn.execute(select(s.events).where(s.events.c.job_id == job_id).order_by(s.events.c.seq)))

    def _job(self, job_id: str):
        with self.store.read() as conn:
            return conn.execute(select(s.jobs).where(s.jobs.c.job_id == job_id)).first()

    def _claim(self, job_id: str):
        """The worker's own claim (a compare-and-set from ASSIGNED), for the in-process driver."""
        with self.store.read() as conn:
            attempt = conn.execute(select(s.attempts).where(
                (s.attempts.c.job_id == job_id) & (s.attempts.c.state == "ASSIGNED"))).first()
        return attempt if attempt is not None and self.worker.claim(attempt) else None

    def _run_attempt(self, job, attempt, out, stop_after) -> int:
        reporter = AttemptReporter(self.store, job.job_id, job.incarnation, attempt.attempt_id)
        reporter.mark_running(pid=0)
        heartbeat = Heartbeat(reporter, interval=0.5, self_fence_after=self.timeouts.driver_self_fence_after,
                              on_fenced=_raise_fenced).start()
        stopper = None
        if stop_after is not None:
            stopper = threading.Thread(target=stop_after, args=(self.store, job.job_id), daemon=True)
            stopper.start()
        try:
            code = self._on_driver_thread(lambda: run_attempt(self.spark, self.store, job.job_id, attempt.attempt_id,
                                                              heartbeat, stdout=out, poll_interval=0.2),
                                          job.job_id, attempt.attempt_id)
        except (Fenced, AttemptFenced):
            code = 75
        finally:
            heartbeat.stop()
            if stopper is not None:
                stopper.join(timeout=60)
        self.worker.record_exit(attempt.attempt_id, code)   # the worker's own reaping
        return code

    def _on_driver_thread(self, call, job_id: str, attempt_id: int):
        """The attempt on a thread of its own, judged meanwhile as the leader judges a driver
        (``seatide.testing.attempt_watch``): a hang fails the run instead of holding the test."""
        if not self.driver_thread:
            call = _with_session(self.spark, call)    # as on the caller's thread, where it is active
        watch = AttemptWatch(self._watch_tick, self.store, job_id, attempt_id, self.data_dir)
        return watch.run(call, name="in-process-driver")


def _with_session(spark, call):
    def on_the_session():
        activate_session(spark)
        return call()
    return on_the_session


def wait_for(condition, what: str, deadline_s: float = 120.0) -> None:
    """Poll ``condition`` until it returns True; an exception counts as not yet (a target
    table not created yet). Fails naming ``what`` and the last answer at the deadline."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except Exception as exc:   # noqa: BLE001 - not there yet
            last = exc
        if last is True:
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


FAKE_FIELDS = "schema = { fields { id = bigint, name = string } }"


def dropped_and_guarded(tmp_path):
    """Two file targets holding a row each: one a DROP_DATA sink empties, one a refusing save mode guards."""
    dropped, guarded = tmp_path / "dropped", tmp_path / "guarded"
    dropped.mkdir()
    guarded.mkdir()
    (dropped / "kept.json").write_text('{"id": -1, "name": "kept"}\n')
    (guarded / "there.json").write_text('{"id": -2, "name": "there"}\n')
    return dropped, guarded


def fake_sources_job(sinks: str, pipelines: int = 1, env: str = "", transform: str = "") -> str:
    """A batch job, never retried, of ``pipelines`` FakeSources (3 rows each, ``s1``, ``s2``) into ``sinks``
    (the sink block's body): a sink reading ``s2`` makes a pipeline of its own. ``env``: more env options
    (``checkpoint.interval = 1000``: micro-batches); ``transform``: the transform block's body."""
    sources = "\n".join(f'  FakeSource {{ plugin_output = "s{i}", row.num = 3, sequence.field = "id", {FAKE_FIELDS} }}'
                        for i in range(1, pipelines + 1))
    return f"""
env {{ job.mode = BATCH, parallelism = 1, job.retry.times = 0, job.retry.interval.seconds = 0{", " + env if env else ""} }}
source {{
{sources}
}}
transform {{ {transform} }}
sink {{
{sinks}
}}
"""
