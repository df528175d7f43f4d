"""The faults a chaos run injects (``chaos.py`` draws them from the seed): processes killed and
paused, jobs cancelled and savepointed then resumed, the store stopped, restarted, its clock
moved, a worker cut off from it.

A mixin of ``Chaos``, in a module of its own because the faults are one seam of a run and the
invariants it checks (``chaos_invariants.py``) another; each fault reads the run's state
(``cluster``, ``rng``, ``jobs``, ``pending``, ``paused``, ``store_*``, ``cut_worker``) and
records itself with ``_fault``. A fault that finds nothing to act on raises ``LookupError``.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Callable

from seatide.store.states import JOB_TERMINAL, JobStatus
from seatide.testing.chaos_invariants import ChaosJob
from seatide.testing.chaos_partition import CUT_WORKER, CutWorker
from seatide.testing.cluster import Proc, http


@dataclass
class Pending:
    due: float
    what: str
    run: Callable[[], None]


class Faults:
    """The faults and their schedule of later steps (restarts, SIGCONTs, resumes), mixed into ``Chaos``."""

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
        self._supervise()

    def _supervise(self) -> None:
        """What each process's supervisor does (deploy/systemd: Restart=always, RestartSec=1):
        one that ended by itself is started again a second after it was seen gone. A process
        ends by itself when it cannot open the store at start-up (chaos stopped the store while
        it was still importing, seconds after restarting it), or when it crashes: the line
        says so either way. Those chaos killed wait for their own restart (``killed``)."""
        now = time.time()
        for proc in list(self.cluster.procs):
            if proc.alive or proc.name in self.killed:
                self.exited_at.pop(proc.name, None)
                continue
            if self.store_down or now - self.exited_at.setdefault(proc.name, now) < 1.0:
                continue     # down: it would end again at once; started once the store is back
            del self.exited_at[proc.name]
            self.log(f"chaos: {proc.name} ended by itself (exit code {proc.popen.returncode}, its log "
                     f"{proc.log_path}); started again, as its supervisor would")
            self.cluster.restart(proc)

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
        self.killed.add(proc.name)
        proc.kill(signal.SIGKILL)
        self._later(self.rng.uniform(0.5, 4.0), f"restart {proc.name}", lambda: self._restart(proc))

    def _restart(self, proc: Proc) -> None:
        if self.store_down:      # it would stop at once, unable to open its store: later
            self._later(1.0, f"restart {proc.name}", lambda: self._restart(proc))
            return
        if proc in self.cluster.procs and not proc.alive:
            self.cluster.restart(proc)
        self.killed.discard(proc.name)     # from now on, its supervisor's (``_supervise``)

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
                self.killed.add(proc.name)
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
        status, answer = ask(coordinator[0].url + "/api/v1/stop-job", body)
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
        status, answer = ask(coordinators[0].url + f"/api/v1/jobs/{job.job_id}/resume", {})
        if status == 200:
            job.stopped = False
            self._fault(f"resume {job.job_id} (was {row.status})")
        else:
            self._later(1.0, f"resume {job.job_id}", lambda: self._resume(job))


def ask(url: str, body: dict, timeout: float = 10.0) -> tuple[int | None, object]:
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
