"""A fleet of simulated drivers: many jobs on the real control plane, without Spark.

    python -m seatide.testing.fleet --store URL --data-dir DIR [--workers 4] [--slots 300]

Scale is a property of the control plane (the leader's tick, the API's reads, the store's
rows), not of Spark. A fleet runs real ``Worker`` agents whose launcher starts a
``FleetDriver`` instead of a process: the worker claims each attempt with its real
compare-and-set and records each exit with its real code, and each driver makes the real
driver's reports through ``AttemptReporter`` and ``Heartbeat``, fenced as a real one is:
mark RUNNING, heartbeat, start its pipelines (from their last batch when resumed), and per
checkpoint interval fence, count the rows read and record the committed batch. A BATCH job's
pipelines end after ``bounded_batches`` batches (end of data, then FINISHED); cancel and
stop-with-savepoint are obeyed as the real driver obeys them.

Each worker steps on its own thread, as it would in its own process; the drivers run
round-robin on one more (the machine has two cores): heartbeats first, then work that is due. When the store cannot keep up the
drivers checkpoint less often than asked; ``FleetStats`` counts what really happened, so
a benchmark reports the rate it reached rather than the one it asked for.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass

from seatide import clock
from seatide.config.loader import load_job_text
from seatide.coordinator.service import node_heartbeat, register_node
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.runtime.heartbeat import FENCED_EXIT_CODE, Heartbeat
from seatide.runtime.reporter import AttemptReporter
from seatide.store.db import AttemptFenced, Store, open_store
from seatide.store.jobs import job_view, submit_job
from seatide.store.states import PIPELINE_TERMINAL
from seatide.testing.sim_machine import FIRST_PID, SimProcess
from seatide.timeouts import Timeouts
from seatide.worker.agent import Worker

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 10
# One source, one sink: one pipeline per job. Staleness is judged on a generous window: a
# fleet that falls behind on a loaded machine is measured, not restarted.
JOB_TEXT = """
env {{ job.mode = {mode}, job.name = "{name}", checkpoint.interval = {interval_ms},
      checkpoint.retained = {retained}, checkpoint.stale-after = 600000,
      job.retry.times = 3, job.retry.interval.seconds = 1 }}
source {{ FakeSource {{ plugin_output = "rows", row.num = 10, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Console {{ plugin_input = "rows" }} }}
"""


def fleet_job_text(mode: str = "STREAMING", interval_ms: int = 1000, name: str = "fleet", retained: int = 100) -> str:
    return JOB_TEXT.format(mode=mode, interval_ms=interval_ms, name=name, retained=retained)


def submit_fleet_jobs(store: Store, data_dir: str, count: int, *, streaming: bool = True,
                      interval_ms: int = 1000, retained: int = 100, prefix: str = "fleet") -> list[str]:
    """Record ``count`` jobs through the store's own submit (the config is parsed once, not per job)."""
    text = fleet_job_text("STREAMING" if streaming else "BATCH", interval_ms, prefix, retained)
    config = load_job_text(text, {}, source_name=prefix)
    plan = build_plan(config)
    outline = outline_json(config)
    return [submit_job(store, text=text, variables={}, config=config, plan=plan, outline=outline,
                       data_dir=data_dir, job_id=f"{prefix}-{i:05d}", actor="fleet") for i in range(count)]


@dataclass
class FleetStats:
    started: int = 0              # drivers launched by the workers
    batches: int = 0              # batches recorded (one checkpoint row each)
    heartbeats: int = 0
    finished: int = 0             # attempts that reported their end
    fenced: int = 0               # drivers fenced off (their attempt replaced)
    errors: int = 0               # reports that raised anything else
    heartbeat_lag_max_s: float = 0.0   # how late the latest-served heartbeat was (behind schedule)
    since: float = 0.0


class FleetDriver:
    """One attempt's driver: ``beat`` and ``work`` are what its heartbeat thread and its
    queries would do, each called when due."""

    def __init__(self, fleet: "Fleet", proc: SimProcess, job_id: str, attempt_id: int):
        self.fleet, self.proc = fleet, proc
        self.job_id, self.attempt_id = job_id, attempt_id
        self.reporter: AttemptReporter | None = None
        self.heartbeat: Heartbeat | None = None
        self.pipes: dict[int, dict] = {}         # pipeline id -> next batch, source, fingerprint
        self.bounded = False
        self.next_beat = 0.0
        self.next_work = 0.0
        self.interval = 1.0

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def exit(self, code: int) -> None:
        if self.proc.returncode is None:
            self.proc.returncode = code

    def _guarded(self, step) -> None:
        try:
            step()
        except AttemptFenced:
            self.fleet.stats.fenced += 1
            self.exit(FENCED_EXIT_CODE)
        except Exception:
            log.exception("fleet driver of attempt %s failed", self.attempt_id)
            self.fleet.stats.errors += 1
            self.exit(1)

    # -- start-up ------------------------------------------------------------------------
    def start(self, now: float) -> None:
        self._guarded(lambda: self._start(now))

    def _start(self, now: float) -> None:
        store = self.fleet.store
        with store.read() as conn:
            view = job_view(conn, self.job_id)
        if view is None:
            self.exit(FENCED_EXIT_CODE)
            return
        job = view.job
        self.reporter = AttemptReporter(store, self.job_id, job.incarnation, self.attempt_id)
        self.reporter.mark_running(self.proc.pid)
        self.heartbeat = Heartbeat(self.reporter, self.fleet.timeouts.driver_heartbeat_interval,
                                   self.fleet.timeouts.driver_self_fence_after,
                                   on_fenced=lambda: self.exit(FENCED_EXIT_CODE))
        self.heartbeat.beat()
        self.next_beat = now + self.heartbeat.interval
        self.bounded = job.mode == "BATCH"
        self.interval = (job.checkpoint_interval_ms or 1000) / 1000.0
        plan = self.fleet.plan_of(job.config)
        for row in view.pipelines:
            if row.status in PIPELINE_TERMINAL:
                continue
            if row.last_batch_id is not None:     # resumed: Spark would restart after its last batch
                self.reporter.pipeline_restored(row.pipeline_id, row.last_batch_id)
            self.reporter.pipeline_status(row.pipeline_id, "RUNNING")
            self.pipes[row.pipeline_id] = {
                "next": 0 if row.last_batch_id is None else row.last_batch_id + 1,
                "source": plan.pipeline(row.pipeline_id).sources[0].plugin_id, "fingerprint": row.fingerprint}
        self.next_work = now + self.interval

    # -- when due ------------------------------------------------------------------------
    def beat(self, now: float) -> None:
        lag = now - self.next_beat
        self.fleet.stats.heartbeat_lag_max_s = max(self.fleet.stats.heartbeat_lag_max_s, lag)
        self.next_beat = now + self.heartbeat.interval
        self.heartbeat.beat()          # fences the driver (exit) when its attempt was replaced
        self.fleet.stats.heartbeats += 1

    def work(self, now: float) -> None:
        self.next_work = now + self.interval
        self._guarded(self._work)

    def _work(self) -> None:
        if self.heartbeat.desired in ("CANCEL", "SAVEPOINT"):
            self._stop(self.heartbeat.desired)
            return
        if not self.pipes:
            self.reporter.end_attempt(succeeded=True)
            self.fleet.stats.finished += 1
            self.exit(0)
            return
        for pipeline_id, pipe in list(self.pipes.items()):
            batch = pipe["next"]
            if self.bounded and batch >= self.fleet.bounded_batches:
                self.reporter.source_ended(pipeline_id, pipe["source"])
                self.reporter.pipeline_status(pipeline_id, "FINISHED")
                del self.pipes[pipeline_id]
                continue
            self.reporter.fence()                       # the sink's commit is fenced first
            self.reporter.rows_read(pipeline_id, batch, ROWS_PER_BATCH)
            self.reporter.batch_committed(pipeline_id, batch, ROWS_PER_BATCH, 5, {"batch": batch},
                                          pipe["fingerprint"])
            pipe["next"] = batch + 1
            self.fleet.stats.batches += 1

    def _stop(self, desired: str) -> None:
        if desired == "SAVEPOINT" and self.pipes:
            # Nothing on disk to copy: the savepoint's rows are what the control plane sees.
            self.reporter.savepoint({p: pipe["next"] - 1 for p, pipe in self.pipes.items()}, lambda _id: None)
        for pipeline_id in list(self.pipes):
            self.reporter.pipeline_status(pipeline_id, "SAVEPOINT_DONE" if desired == "SAVEPOINT" else "CANCELED")
            del self.pipes[pipeline_id]
        self.reporter.end_attempt(succeeded=True)
        self.fleet.stats.finished += 1
        self.exit(0)


class FleetLauncher:
    """A worker's launcher: the "process" it starts is a ``FleetDriver`` in the fleet's loop."""

    def __init__(self, fleet: "Fleet"):
        self.fleet = fleet

    def start(self, command: list[str], log_file, env: dict[str, str], inherit_stdout: bool) -> SimProcess:
        job_id = command[command.index("--job-id") + 1]
        attempt_id = int(command[command.index("--attempt") + 1])
        return self.fleet.launch(job_id, attempt_id)


class Fleet:
    def __init__(self, store: Store, data_dir: str, *, workers: int = 2, slots: int = 50,
                 timeouts: Timeouts = Timeouts(), bounded_batches: int = 3, prefix: str = "fleet-w"):
        self.store = store
        self.data_dir = data_dir
        self.timeouts = timeouts.check()
        self.bounded_batches = bounded_batches
        self.stats = FleetStats(since=clock.now())
        self.drivers: list[FleetDriver] = []
        self.next_pid = FIRST_PID
        self._plans: dict[str, object] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.workers = [Worker(store, store.url, data_dir, node_id=f"{prefix}{i}", slots=slots, timeouts=timeouts,
                               launcher=FleetLauncher(self)) for i in range(workers)]

    def plan_of(self, text: str):
        if text not in self._plans:
            self._plans[text] = build_plan(load_job_text(text, {}, source_name="fleet job"))
        return self._plans[text]

    def launch(self, job_id: str, attempt_id: int) -> SimProcess:
        with self._lock:                 # called from the workers' threads
            process = SimProcess(self.next_pid)
            self.next_pid += 1
            driver = FleetDriver(self, process, job_id, attempt_id)
            self.drivers.append(driver)      # started by the loop, as a process starts after its fork
            self.stats.started += 1
        return process

    # -- the loop ------------------------------------------------------------------------
    def register(self) -> None:
        for worker in self.workers:
            register_node(self.store, worker.node_id, "worker", slots=worker.slots)

    def round(self) -> float:
        """Every due heartbeat, then every due piece of work, then the workers; returns the
        seconds until something is due next."""
        now = clock.now()
        with self._lock:
            self.drivers = [d for d in self.drivers if d.alive]
            drivers = list(self.drivers)
        for driver in drivers:
            if driver.heartbeat is not None and now >= driver.next_beat and driver.alive:
                driver.beat(now)
        # Work for at most half a heartbeat interval, then heartbeats again: starts first, then
        # the most overdue batches, so when the store cannot keep up every driver slows alike.
        # Counted from after the heartbeats: when they alone fill a round (hundreds of drivers
        # on a loaded machine) a budget counted from the round's start let no driver start.
        began = clock.now()
        budget = self.timeouts.driver_heartbeat_interval / 2
        due = sorted((d for d in drivers if d.reporter is None or (d.heartbeat is not None and now >= d.next_work)),
                     key=lambda d: -1.0 if d.reporter is None else d.next_work)
        for driver in due:
            now = clock.now()
            if now - began > budget:
                break
            if not driver.alive:
                continue
            if driver.reporter is None:
                driver.start(now)
            else:
                driver.work(now)
        due = [clock.now() + 0.05]
        due += [min(d.next_beat, d.next_work) if d.heartbeat is not None else 0.0 for d in drivers if d.alive]
        return max(0.0, min(due) - clock.now())

    def _work_as(self, worker: Worker) -> None:
        """One worker's loop, on its own thread as it would be in its own process: a worker
        claiming hundreds of attempts does not hold up the drivers' heartbeats or the others."""
        while not self._stop.is_set():
            try:
                worker.step()      # claims new attempts (launching drivers), records exits, kills
            except Exception:
                log.exception("fleet worker %s: step failed", worker.node_id)
            self._stop.wait(0.25)

    def run(self) -> None:
        self.register()
        for worker in self.workers:
            worker.start_heartbeat()      # its own thread, as in Worker.run
        threads = [threading.Thread(target=self._work_as, args=(w,), name=f"fleet-{w.node_id}", daemon=True)
                   for w in self.workers]
        for thread in threads:
            thread.start()
        while not self._stop.is_set():
            try:
                wait = self.round()
            except Exception:
                log.exception("fleet round failed")
                wait = 0.25
            self._stop.wait(min(wait, 0.05))
        for thread in threads:
            thread.join(timeout=30)

    def start(self) -> "Fleet":
        self._thread = threading.Thread(target=self.run, name="fleet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for worker in self.workers:     # a stopped worker: its drivers die with it
            for driver in self.drivers:
                driver.exit(-9)
            worker.stop_heartbeat()
            try:
                node_heartbeat(self.store, worker.node_id, stopped=True)
            except Exception:
                log.exception("worker %s: could not record its stop", worker.node_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seatide.testing.fleet",
                                     description="Run simulated workers and drivers against a store until SIGTERM.")
    parser.add_argument("--store", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--slots", type=int, default=300, help="slots per worker")
    parser.add_argument("--stats-file", help="where to write the fleet's counters (JSON), every second and at exit")
    parser.add_argument("--timeouts", default="{}",
                        help='JSON of Timeouts fields, e.g. {"driver_heartbeat_interval": 2}; give the coordinator the same')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = open_store(args.store)
    fleet = Fleet(store, args.data_dir, workers=args.workers, slots=args.slots,
                  timeouts=Timeouts(**json.loads(args.timeouts)))
    signal.signal(signal.SIGTERM, lambda *_: fleet._stop.set())
    signal.signal(signal.SIGINT, lambda *_: fleet._stop.set())
    fleet.start()
    while not fleet._stop.wait(1.0):
        _write_stats(args.stats_file, fleet.stats)
    fleet.stop()
    _write_stats(args.stats_file, fleet.stats)
    return 0


def _write_stats(path: str | None, stats: FleetStats) -> None:
    if path is None:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump({**asdict(stats), "at": time.time()}, handle)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
