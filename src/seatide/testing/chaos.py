"""Seeded chaos with real processes: ``python -m seatide.testing.chaos --seed N ...``

Starts coordinators and workers as real processes on a real store, runs a mix of BATCH and
STREAMING jobs (LocalFile sinks, sequence ids), and, from the seed, kills and pauses leaders,
followers, workers and drivers (sometimes all at once), cancels, savepoints and resumes jobs,
and, with ``--store private-postgres``, stops the store for seconds (an outage), restarts its
server at once while every process lives (every session and liveness lock lost: a failover),
and (as root, see ``chaos_partition.py``) cuts one worker and its drivers off from the store,
in a network namespace, for longer than the leader takes to replace them. A process that ends
by itself (it could not open the store while starting, or it crashed) is started again a
second later, as its supervisor would (deploy/systemd), and the run says so. With
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
import sys
import tempfile
import threading
import time
from typing import Callable

from seatide.store.states import JOB_TERMINAL, JobStatus
from seatide.testing.chaos_faults import Faults, Pending, ask
from seatide.testing.chaos_invariants import ChaosJob, ChaosReport, Invariants
from seatide.testing.chaos_partition import CutWorker
from seatide.testing.cluster import Cluster, wait_for
from seatide.testing.jobs import batch_job, streaming_job
from seatide.testing.partition import Partition, PartitionUnavailable, unavailable

ROWS_PER_SPLIT = 10


class Chaos(Faults, Invariants):
    """The run: start the cluster and the jobs, inject faults from the seed until the time is up,
    heal, settle, check. The faults (``chaos_faults.py``) and the invariants checked
    (``chaos_invariants.py``) are mixed in from modules of their own."""

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
        self.killed: set[str] = set()          # processes chaos killed, until their scheduled restart
        self.exited_at: dict[str, float] = {}  # processes that ended by themselves: when seen gone
        self.overlaps: set[tuple] = set()      # (job, *pids) of drivers seen at once: reported once
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
        # Every process started at once, then waited for: each spends seconds importing, which
        # one after the other took 14 s of a short run (load 14; c1 06:02:37.8 .. w-cut 49.4).
        coordinators = [self.cluster.coordinator(f"c{i + 1}", wait=False) for i in range(self.n_coordinators)]
        workers = [self.cluster.worker(f"w{i + 1}", slots=2, wait=False) for i in range(self.n_workers)]
        if self.cut_worker is not None:     # besides the others: never the only one able to run jobs
            workers.append(self.cut_worker.start(self.cluster, wait=False))
        self.cluster.wait_serving(*coordinators)
        self.cluster.wait_registered(*workers)
        for i in range(self.n_jobs):
            # Every third a stream; of two jobs, the second: one of each kind, each checked its way.
            mode = "STREAMING" if i % 3 == 2 or (self.n_jobs == 2 and i == 1) else "BATCH"
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
            status, answer = ask(self.cluster.any_coordinator().url + "/api/v1/submit-job",
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
            self._supervise()      # a process that ends now is started again, as in production
            return all(self._unsettled(job, settle_began) is None for job in self.jobs)

        try:
            wait_for(converged, timeout, interval=1.0, message="every job to converge")
            self.report.measured.append(f"converged {time.time() - settle_began:.1f} s after the heal")
        except AssertionError:
            # Each job on its own: the wait stops at the first that has not converged
            for job in self.jobs:
                why = self._unsettled(job, settle_began)
                if why is not None:
                    self._violation(job, f"did not converge within {timeout:.0f} s of the heal: {why}")

    def _unsettled(self, job: ChaosJob, since: float) -> str | None:
        """Why the job has not converged since ``since``; None once it has."""
        row = self.cluster.job(job.job_id)
        if row is None:
            return "no row in the store"
        if job.stopped and row.status in JOB_TERMINAL:     # a resume refused while the store was down
            self._resume(job)
            return f"stopped by chaos ({row.status}) and not resumed yet"
        if job.mode == "BATCH" and row.status != JobStatus.FINISHED:
            return f"BATCH job {row.status}, not FINISHED"
        if job.mode == "STREAMING" and not self._fresh_checkpoint(job, since):
            return f"STREAMING job {row.status}, no checkpoint since the heal"
        return None


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
    parser.add_argument("--jobs", type=int, default=3,
                        help="every third is STREAMING (of two, the second), the rest BATCH")
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
