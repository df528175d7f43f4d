"""Seeded chaos with real processes: ``python -m seatide.testing.chaos --seed N ...``

Starts coordinators and workers as real processes on a real store, runs a mix of BATCH and
STREAMING jobs (LocalFile sinks, sequence ids), and, from the seed, kills and pauses leaders,
followers, workers and drivers (sometimes all at once), cancels, savepoints and resumes jobs,
and, with ``--store private-postgres``, stops the store for seconds (an outage), restarts its
server at once while every process lives (every session and liveness lock lost: a failover),
and (as root, see ``chaos_partition.py``) cuts one worker and its drivers off from the store,
in a network namespace, for longer than the leader takes to replace them. With
``--store-clock-offset`` the private server's clock is moved (its ``clock_timestamp()``,
``testing/servers.py``) against every SeaTide process's. Then it lets everything settle
and checks, against the store and the sink output:

* a terminal status never changes (a resume is a new incarnation);
* a job never has two live attempts, nor two driver processes (both sampled all along);
* every row of a BATCH job is written exactly once; a STREAMING job's rows once each, with
  no gap below the highest;
* no event carries an epoch older than one already written (a fenced write is refused);
* a driver cut off from the store decides (so publishes) nothing after its attempt ended;
* every BATCH job FINISHES, every STREAMING job is RUNNING with fresh checkpoints.

The schedule of faults comes from the seed alone; what the processes do in between is up to
the machine, so a run is reproducible in its faults, not in its interleaving (the
deterministic simulation, ``seatide.testing.simulate``, is the one to replay exactly).
The last line is ``chaos: seed=N faults=F jobs=J violations=V``; exit 0 only when V is 0.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, JobStatus
from seatide.testing.chaos_partition import CUT_WORKER, CutWorker
from seatide.testing.cluster import Cluster, Proc, drivers_by_job, http, wait_for
from seatide.testing.jobs import batch_job, streaming_job, written_ids
from seatide.testing.partition import Partition, PartitionUnavailable, unavailable

ROWS_PER_SPLIT = 10


@dataclass
class ChaosJob:
    job_id: str
    mode: str                 # BATCH | STREAMING
    out: str
    rows: int = 0             # BATCH: ids 0 .. rows-1
    stopped: bool = False     # cancelled or savepointed by chaos: resumed later


@dataclass
class Pending:
    due: float
    what: str
    run: Callable[[], None]


@dataclass
class ChaosReport:
    seed: int
    faults: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)     # timings worth a line of their own
    jobs: int = 0

    def line(self) -> str:
        return f"chaos: seed={self.seed} faults={len(self.faults)} jobs={self.jobs} violations={len(self.violations)}"


class Chaos:
    def __init__(self, seed: int, duration: float, store_url: str, data_dir: str, coordinators: int = 2,
                 workers: int = 2, jobs: int = 3, store_server=None, cut_worker: CutWorker | None = None,
                 log: Callable[[str], None] = print, first_faults: tuple[str, ...] = ()):
        self.rng = random.Random(seed)
        self.duration = duration
        self.cluster = Cluster(store_url, data_dir)
        self.cluster.cleanup_delay = 600.0     # outputs and events stay until checked
        self.store_server = store_server       # a PrivatePostgres we may stop and start
        self.store_down = False
        self.cut_worker = cut_worker           # one more worker, which chaos may cut off from the store
        self.paused: set[int] = set()          # SIGSTOPped pids: they answer nothing until continued
        self.n_coordinators, self.n_workers, self.n_jobs = coordinators, workers, jobs
        self.jobs: list[ChaosJob] = []
        self.pending: list[Pending] = []
        self.report = ChaosReport(seed)
        self.log = log
        self.first_faults = list(first_faults)     # by name, injected before the seeded draw
        self.began = 0.0
        self._sampler_stop = threading.Event()

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> ChaosReport:
        try:
            self._start()
            sampler = threading.Thread(target=self._sample_attempts, daemon=True)
            sampler.start()
            self._inject_until(time.time() + self.duration)
            self._heal()
            self._settle()
            self._sampler_stop.set()
            sampler.join()
            self._check()
        finally:
            self._sampler_stop.set()
            self.cluster.stop_all()
        self.report.jobs = len(self.jobs)
        return self.report

    def _start(self) -> None:
        self.began = time.time()
        for i in range(self.n_coordinators):
            self.cluster.coordinator(f"c{i + 1}")
        for i in range(self.n_workers):
            self.cluster.worker(f"w{i + 1}", slots=2)
        if self.cut_worker is not None:     # besides the others: never the only one able to run jobs
            self.cut_worker.start(self.cluster)
        for i in range(self.n_jobs):
            mode = "STREAMING" if i % 3 == 2 else "BATCH"
            job = ChaosJob(f"chaos-{self.report.seed}-{i}", mode,
                           os.path.join(self.cluster.data_dir, "out", f"job{i}"))
            if mode == "BATCH":
                pipelines = 1 + self.rng.randrange(2)
                rows = self.rng.choice((600, 1200))
                job.rows = rows * pipelines
                # one sink directory per pipeline: p0, p1 under the job's output
                config = batch_job(job.out, rows=rows, pipelines=pipelines, rows_per_batch=rows // 6,
                                   retries=100, name=job.job_id)
            else:
                config = streaming_job(job.out, splits=100_000, rows_per_split=ROWS_PER_SPLIT, interval_ms=1000,
                                       read_interval_ms=100, retries=100, name=job.job_id)
            status, answer = _ask(self.cluster.any_coordinator().url + "/api/v1/submit-job",
                                  {"config": config, "jobId": job.job_id}, timeout=60.0)
            if status != 200:
                raise RuntimeError(f"chaos: submitting {job.job_id} failed: {status} {answer}")
            self.jobs.append(job)

    def _inject_until(self, end: float) -> None:
        # (fault, weight): single faults often, everything at once now and then
        faults = [(self._kill_leader, 3), (self._kill_follower, 2), (self._pause_leader, 2), (self._kill_worker, 3),
                  (self._pause_worker, 2), (self._kill_driver, 3), (self._pause_driver, 2),
                  (self._kill_everything, 1), (self._cancel_job, 2), (self._savepoint_job, 2)]
        if self.store_server is not None:
            faults += [(self._restart_store, 2), (self._restart_store_server, 2), (self._skew_store_clock, 1)]
        if self.cut_worker is not None:
            faults.append((self._partition_worker, 3))
        while time.time() < end:
            self._run_due()
            # Room between faults for processes to come back: a restart costs seconds here.
            self._wait(self.rng.uniform(1.0, 5.0))
            if time.time() >= end:
                break
            named = {f.__name__.lstrip("_"): f for f, _ in faults}
            first = self.first_faults.pop(0) if self.first_faults else None
            if first is not None and first not in named:
                raise ValueError(f"chaos: no fault {first!r} here; one of {', '.join(sorted(named))}")
            fault = named[first] if first else self.rng.choices([f for f, _ in faults],
                                                                  weights=[w for _, w in faults])[0]
            try:
                fault()
            except Exception as exc:     # a fault that found nothing to act on (all busy restarting)
                self.log(f"chaos: {fault.__name__} skipped: {exc}")

    def _heal(self) -> None:
        """Everything back: due restarts and resumes now, paused processes continued, store up.
        A partition lasts its whole time, though: it is there to outlast the replacement."""
        while self.cut_worker is not None and self.cut_worker.partition.is_cut:
            self._wait(0.1)
        if self.store_down:
            self.store_server.start_server()
            self.store_down = False
        for item in sorted(self.pending, key=lambda p: p.due):
            item.run()
        self.pending.clear()
        for proc in list(self.cluster.procs):     # also those that died starting while the store was down
            if not proc.alive:
                self.cluster.restart(proc)
        for job in self.jobs:
            if job.stopped:
                self._resume(job)

    def _settle(self, timeout: float = 300.0) -> None:
        settle_began = time.time()

        def converged() -> bool:
            for job in self.jobs:
                row = self.cluster.job(job.job_id)
                if row is None:
                    return False
                if job.stopped and row.status in JOB_TERMINAL:     # a resume refused while the store was down
                    self._resume(job)
                    return False
                if job.mode == "BATCH" and row.status != JobStatus.FINISHED:
                    return False
                if job.mode == "STREAMING" and not self._fresh_checkpoint(job, settle_began):
                    return False
            return True

        try:
            wait_for(converged, timeout, interval=1.0, message="every job to converge")
            self.report.measured.append(f"converged {time.time() - settle_began:.1f} s after the heal")
        except AssertionError as exc:
            for job in self.jobs:
                row = self.cluster.job(job.job_id)
                self._violation(job, f"did not converge: {exc}; status {row.status if row else None}")

    # -- faults ------------------------------------------------------------------------------

    def _fault(self, text: str) -> None:
        stamp = f"+{time.time() - self.began:6.1f}s {text}"
        self.report.faults.append(stamp)
        self.log(f"chaos: {stamp}")

    def _later(self, delay: float, what: str, run: Callable[[], None]) -> None:
        self.pending.append(Pending(time.time() + delay, what, run))

    def _run_due(self) -> None:
        now = time.time()
        for item in [p for p in self.pending if p.due <= now]:
            self.pending.remove(item)
            item.run()

    def _wait(self, seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            self._run_due()
            time.sleep(min(0.1, max(0.0, end - time.time())))

    def _alive(self, kind: str) -> list[Proc]:
        return [p for p in self.cluster.procs if p.alive and p.popen.pid not in self.paused
                and (p.url is not None) == (kind == "coordinator")]

    def _leader(self) -> Proc | None:
        lease = self.cluster.leader()
        if lease is None or not lease.node_id:
            return None
        return next((p for p in self._alive("coordinator") if p.name == lease.node_id), None)

    def _kill_and_restart(self, proc: Proc, why: str) -> None:
        self._fault(f"SIGKILL {why} {proc.name}")
        proc.kill(signal.SIGKILL)
        self._later(self.rng.uniform(0.5, 4.0), f"restart {proc.name}", lambda: self._restart(proc))

    def _restart(self, proc: Proc) -> None:
        if self.store_down:      # it would stop at once, unable to open its store: later
            self._later(1.0, f"restart {proc.name}", lambda: self._restart(proc))
        elif proc in self.cluster.procs and not proc.alive:
            self.cluster.restart(proc)

    def _pause(self, pid: int, name: str, seconds: float) -> None:
        self._fault(f"SIGSTOP {name} for {seconds:.1f} s")
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        self.paused.add(pid)

        def resume() -> None:
            self.paused.discard(pid)
            _signal(pid, signal.SIGCONT)
        self._later(seconds, f"SIGCONT {name}", resume)

    def _kill_leader(self) -> None:
        leader = self._leader()
        if leader is None:
            raise LookupError("no live leader")
        self._kill_and_restart(leader, "leader")

    def _kill_follower(self) -> None:
        leader = self._leader()
        followers = [p for p in self._alive("coordinator") if p is not leader]
        if not followers:
            raise LookupError("no live follower")
        self._kill_and_restart(self.rng.choice(followers), "follower")

    def _pause_leader(self) -> None:
        leader = self._leader()
        if leader is None:
            raise LookupError("no live leader")
        # Sometimes past the lease: it must come back fenced, not as a second leader.
        self._pause(leader.popen.pid, f"leader {leader.name}", self.rng.uniform(0.5, 6.0))

    def _kill_worker(self) -> None:
        workers = self._alive("worker")
        if not workers:
            raise LookupError("no live worker")
        self._kill_and_restart(self.rng.choice(workers), "worker")

    def _pause_worker(self) -> None:
        workers = self._alive("worker")
        if not workers:
            raise LookupError("no live worker")
        worker = self.rng.choice(workers)
        self._pause(worker.popen.pid, f"worker {worker.name}", self.rng.uniform(0.5, 8.0))

    def _drivers(self) -> list[int]:
        return sorted(self.cluster.driver_pids())

    def _kill_driver(self) -> None:
        drivers = self._drivers()
        if not drivers:
            raise LookupError("no driver running")
        pid = self.rng.choice(drivers)
        self._fault(f"SIGKILL driver pid {pid}")
        _signal(pid, signal.SIGKILL)

    def _pause_driver(self) -> None:
        drivers = self._drivers()
        if not drivers:
            raise LookupError("no driver running")
        # Long enough, sometimes, for the driver to be declared hung and replaced: it must
        # then publish nothing when it wakes.
        self._pause(self.rng.choice(drivers), "driver", self.rng.uniform(1.0, 12.0))

    def _kill_everything(self) -> None:
        self._fault("SIGKILL every coordinator and worker")
        for proc in list(self.cluster.procs):
            if proc.alive:
                proc.kill(signal.SIGKILL)
                self._later(self.rng.uniform(0.5, 3.0), f"restart {proc.name}",
                            lambda proc=proc: self._restart(proc))

    def _restart_store(self) -> None:
        if self.store_down:
            raise LookupError("the store is already down")
        seconds = self.rng.uniform(1.0, 6.0)
        self._fault(f"store stopped (immediate) for {seconds:.1f} s")
        self.store_down = True
        self.store_server.stop_server()

        def start() -> None:
            if self.store_down:
                self.store_server.start_server()
                self.store_down = False
        self._later(seconds, "store start", start)

    def _restart_store_server(self) -> None:
        """A fast restart (a failover): sessions and liveness locks go while every holder lives."""
        if self.store_down:
            raise LookupError("the store is down")
        self._fault("store server restarted (fast) under live processes")
        self.store_server.restart_server("fast")

    def _skew_store_clock(self) -> None:
        """The store's server comes back from a restart with its clock moved (``clock_offset``):
        ahead of or behind every SeaTide process, or back in step."""
        if self.store_down:
            raise LookupError("the store is down")
        offset = self.rng.choice(("+8s", "-8s", "+3s", "-3s", None))
        self._fault(f"store server restarted with its clock {offset or 'in step'} against SeaTide's")
        self.store_server.clock_offset = offset
        self.store_server.restart_server("fast")

    def _partition_worker(self) -> None:
        if self.cut_worker.partition.is_cut:
            raise LookupError("the worker is cut off already")
        needed = CutWorker.seconds_needed(self.cluster.timeouts)
        seconds = self.rng.uniform(needed + 1.0, needed + 4.0)
        self._fault(f"partition {CUT_WORKER} and its drivers from the store for {seconds:.1f} s")
        self.cut_worker.cut(seconds)

        def heal() -> None:
            self.cut_worker.heal()
            self._fault(f"partition of {CUT_WORKER} healed")
        self._later(seconds, "heal the partition", heal)

    def _running_job(self) -> ChaosJob:
        candidates = [j for j in self.jobs if not j.stopped]
        if not candidates or self.store_down:
            raise LookupError("no job to stop, or the store is down")
        return self.rng.choice(candidates)

    def _cancel_job(self) -> None:
        self._stop(self._running_job(), savepoint=False)

    def _savepoint_job(self) -> None:
        self._stop(self._running_job(), savepoint=True)

    def _stop(self, job: ChaosJob, savepoint: bool) -> None:
        coordinator = self._alive("coordinator")
        if not coordinator:
            raise LookupError("no coordinator to ask")
        body = {"jobId": job.job_id, "isStopWithSavePoint": savepoint}
        status, answer = _ask(coordinator[0].url + "/api/v1/stop-job", body)
        if status != 200:
            raise LookupError(f"stop refused: {status} {answer}")
        job.stopped = True
        self._fault(f"{'savepoint' if savepoint else 'cancel'} {job.job_id}")
        self._later(self.rng.uniform(2.0, 8.0), f"resume {job.job_id}", lambda: self._resume(job))

    def _resume(self, job: ChaosJob) -> None:
        """Resume once the stop has ended the job; until then (or while nothing serves) try later."""
        row = None if self.store_down else self.cluster.job(job.job_id)
        coordinators = self._alive("coordinator")
        if row is None or row.status not in JOB_TERMINAL or not coordinators:
            self._later(1.0, f"resume {job.job_id}", lambda: self._resume(job))
            return
        if row.status == JobStatus.FINISHED:     # the stop came after its last batch
            job.stopped = False
            return
        status, answer = _ask(coordinators[0].url + f"/api/v1/jobs/{job.job_id}/resume", {})
        if status == 200:
            job.stopped = False
            self._fault(f"resume {job.job_id} (was {row.status})")
        else:
            self._later(1.0, f"resume {job.job_id}", lambda: self._resume(job))

    # -- invariants ------------------------------------------------------------------------

    def _violation(self, job: ChaosJob | None, text: str) -> None:
        message = f"{job.job_id}: {text}" if job else text
        if message not in self.report.violations:
            self.report.violations.append(message)

    def _sample_attempts(self) -> None:
        """A job never has two live attempts, nor two driver processes, at any moment we look."""
        while not self._sampler_stop.wait(0.2):
            for job_id, pids in drivers_by_job(self.cluster.store_urls()).items():
                if len(pids) > 1:
                    self._violation(None, f"{job_id}: {len(pids)} driver processes at once (pids {sorted(pids)})")
            if self.store_down:
                continue
            try:
                with self.cluster.store.read() as conn:
                    rows = conn.execute(select(s.attempts.c.job_id, s.attempts.c.attempt_id).where(
                        s.attempts.c.state.in_(ATTEMPT_LIVE))).all()
                    if self.cut_worker is not None:
                        self.cut_worker.sample(conn, time.time())
            except Exception:       # the store restarting under us
                continue
            live = Counter(row.job_id for row in rows)
            for job_id, n in live.items():
                if n > 1:
                    self._violation(None, f"{job_id}: {n} live attempts at once")

    def _fresh_checkpoint(self, job: ChaosJob, since: float) -> bool:
        with self.cluster.store.read() as conn:
            latest = conn.execute(select(s.checkpoints.c.created_at).where(
                s.checkpoints.c.job_id == job.job_id).order_by(s.checkpoints.c.created_at.desc()).limit(1)).scalar()
            status = conn.execute(select(s.jobs.c.status).where(s.jobs.c.job_id == job.job_id)).scalar()
        return status == JobStatus.RUNNING and latest is not None and latest > since

    def _check(self) -> None:
        for job in self.jobs:
            ids = written_ids(job.out)
            duplicates = {i: n for i, n in ids.items() if n > 1}
            if duplicates:
                self._violation(job, f"rows written more than once: {sorted(duplicates.items())[:10]}")
            if job.mode == "BATCH":
                missing = set(range(job.rows)) - set(ids)
                if missing:
                    self._violation(job, f"{len(missing)} rows missing, e.g. {sorted(missing)[:10]}")
            elif ids:
                gaps = set(range(max(ids) + 1)) - set(ids)
                if gaps:
                    self._violation(job, f"{len(gaps)} rows missing below the highest, e.g. {sorted(gaps)[:10]}")
            self._check_events(job)
        self._check_epochs()
        if self.cut_worker is not None:
            for text in self.cut_worker.violations(self.cluster):
                self._violation(None, text)
            self.report.measured.extend(self.cut_worker.measured(self.cluster))

    def _check_events(self, job: ChaosJob) -> None:
        ended: dict[int, str] = {}
        for event in self.cluster.events(job.job_id):
            if not event.kind.startswith("JOB_") or event.kind == "JOB_SUBMITTED":
                continue
            status = event.kind[4:]
            if event.incarnation in ended:
                self._violation(job, f"incarnation {event.incarnation} moved to {status} "
                                     f"after ending {ended[event.incarnation]}")
            if status in JOB_TERMINAL:
                ended[event.incarnation] = status

    def _check_epochs(self) -> None:
        highest = 0
        for event in self.cluster.events():
            if event.epoch is None:
                continue
            if event.epoch < highest:
                self._violation(None, f"event {event.seq} ({event.kind} by {event.actor}) carries epoch "
                                      f"{event.epoch} after epoch {highest} was written")
            highest = max(highest, event.epoch)

    def explain(self) -> str:
        """The fault history and each job's event log, for a failed run."""
        lines = [f"seed {self.report.seed}", "faults:", *("  " + f for f in self.report.faults)]
        for job in self.jobs:
            lines.append(f"events of {job.job_id}:")
            for event in self.cluster.events(job.job_id):
                lines.append(f"  {event.seq} {event.kind} inc={event.incarnation} epoch={event.epoch} "
                             f"by {event.actor} {event.detail}")
        return "\n".join(lines)


def _ask(url: str, body: dict, timeout: float = 10.0) -> tuple[int | None, object]:
    """POST, with a coordinator that dies or stalls under us as an answer, not an exception."""
    try:
        return http("POST", url, body, timeout=timeout)
    except OSError as exc:     # refused, reset, timed out
        return None, str(exc)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seatide.testing.chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults before settling")
    parser.add_argument("--store", default="sqlite",
                        help="'sqlite' (a file in the data dir), 'private-postgres' (a server of its own, "
                             "which chaos also stops and restarts), or a store URL")
    parser.add_argument("--data-dir", default=None, help="default: a new temporary directory")
    parser.add_argument("--coordinators", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=3, help="every third is STREAMING, the rest BATCH")
    parser.add_argument("--first-faults", default="",
                        help="comma-separated faults to inject first, in order (e.g. partition_worker,"
                             "restart_store_server), before the seeded draw: CI makes sure they are exercised")
    parser.add_argument("--store-clock-offset", default=None,
                        help="with private-postgres: the server's clock moved by this much against SeaTide's "
                             "(e.g. +8s, -8s)")
    parser.add_argument("--no-partition", action="store_true",
                        help="with private-postgres: no extra worker in a network namespace, no partition fault")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="seatide-chaos-")
    server = partition = cut_worker = None
    if args.store == "sqlite":
        store_url = f"sqlite:///{os.path.join(data_dir, 'state.db')}"
    elif args.store == "private-postgres":
        from seatide.testing.servers import PrivatePostgres

        partition = None if args.no_partition else _partition(args.seed)
        server = PrivatePostgres(also_listen_on=partition and partition.host_address,
                                 also_trust=partition and str(partition.subnet),
                                 clock_offset=args.store_clock_offset).start()
        store_url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        cut_worker = partition and CutWorker.inside(partition, store_url)
    else:
        store_url = args.store
    try:
        chaos = Chaos(args.seed, args.duration, store_url, data_dir, args.coordinators, args.workers,
                      args.jobs, store_server=server, cut_worker=cut_worker,
                      first_faults=tuple(f for f in args.first_faults.split(",") if f))
        report = chaos.run() if server is None else _run_with_store(chaos)
        if report.violations:
            print("violations:", *("  " + v for v in report.violations), sep="\n")
            print(chaos.explain())
        for line in report.measured:
            print(f"chaos: {line}")
        print(report.line())
        return 0 if not report.violations else 1
    finally:
        if server is not None:
            server.stop()
        if partition is not None:
            partition.close()


def _partition(seed: int) -> Partition | None:
    """A partition for the cut worker, or None (and one line saying why) on a machine without."""
    why = unavailable()
    if why is None:
        try:
            return Partition(seed).create()
        except PartitionUnavailable as exc:
            why = str(exc)
    print(f"chaos: no partition fault: {why}")
    return None


def _run_with_store(chaos: Chaos) -> ChaosReport:
    # The checks read the store: it must be up whatever happened.
    try:
        return chaos.run()
    finally:
        if chaos.store_down:
            chaos.store_server.start_server()


if __name__ == "__main__":
    sys.exit(main())
