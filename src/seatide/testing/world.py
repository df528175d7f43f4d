"""The simulated cluster: real coordinators, workers and reporters on one real SQLite store,
with one simulated clock (skewable per process), a simulated process table, and faults
applied as steps.

An action is plain data, ``(kind, target, value, dt)``, so a run is its list of actions
and replays exactly: the scheduler in ``simulate`` draws them from a seeded generator, a
shrunk trace replays a subset of them.
"""

from __future__ import annotations

import logging
import os
import random

from sqlalchemy import select

from seatide import clock, intents
from seatide.coordinator.service import Coordinator, register_node
from seatide.store import schema as s
from seatide.store.db import AttemptFenced, open_store
from seatide.store.restore import savepoint_ids
from seatide.store.states import IllegalTransition
from seatide.testing import stalls
from seatide.testing.invariants import Invariants
from seatide.store.liveness import worker_lock
from seatide.testing.sim_machine import FIRST_PID, Proc, ProcessStore, SimLocks, SimProcess, StorePartitioned
from seatide.testing.processes import Ledger, SimDriver, SimLauncher
from seatide.testing.world_steps import Steps
from seatide.worker.agent import Worker

COORDINATORS = ("c0", "c1", "c2")
WORKERS = ("w0", "w1")
JOB_IDS = ("batch-a", "batch-b", "stream-a", "batch-c", "stream-b")
HISTORY_EXPIRE_S = 30.0
START = 1_000_000.0           # simulated Unix time at the start of every run

_ENV = ("job.mode = {mode}, checkpoint.interval = 1000, checkpoint.stale-after = 15000, "
        "job.retry.times = 2, job.retry.interval.seconds = 1, state-cleanup-delay = 3")
# Two sources, two sinks, linked in pairs: two pipelines per job.
JOB_TEXT = """
env {{ {env} }}
source {{
  FakeSource {{ plugin_output = "a", row.num = 10, schema = {{ fields {{ id = bigint }} }} }}
  FakeSource {{ plugin_output = "b", row.num = 10, schema = {{ fields {{ id = bigint }} }} }}
}}
sink {{
  Console {{ plugin_input = "a" }}
  Console {{ plugin_input = "b" }}
}}
"""


def job_text(job_id: str) -> str:
    mode = "STREAMING" if job_id.startswith("stream") else "BATCH"
    return JOB_TEXT.format(env=_ENV.format(mode=mode))


class World(Steps):
    def __init__(self, data_dir: str, split_commit: bool = False, liveness_locks: bool = True):
        self.data_dir = data_dir
        self.split_commit = split_commit
        # Liveness locks, as a cluster runs by default; off: lease and heartbeats alone.
        self.locks = SimLocks() if liveness_locks else None
        self.t = START
        self.current: Proc | None = None
        self._previous_clock = clock.use(self.now)
        # The store keeps the true time, as a PostgreSQL server does, whatever each process's
        # clock says: every stamp a process writes, and every comparison the leader makes, is on it.
        clock.use_store_clock(lambda: self.t)
        self.shared = open_store(f"sqlite:///{os.path.join(data_dir, 'state.db')}")
        self.client = ProcessStore(self.shared)            # users' requests: never cut off
        self.check = Invariants(ProcessStore(self.shared))
        self.ledger = Ledger()
        self.procs: dict[str, Proc] = {}
        self.reports: dict[str, tuple[str, object]] = {}   # driver -> its last report (for duplicates)
        self.delayed: list[tuple[str, str, object]] = []  # (driver, report, call) arriving late
        self.submitted: list[str] = []
        self.attempt_runs: dict[int, str | None] = {}      # attempt id -> the run it was started for
        self.lineages = 0
        self.next_pid = FIRST_PID
        # The furthest any process's clock ran ahead of the true one: a deadline it stamped
        # (a history expiry, a cleanup retry) comes due that much later by the true clock.
        self.most_ahead = 0.0
        for name in COORDINATORS:
            self._start(self._proc(name, "coordinator"))
        for name in WORKERS:
            self._start(self._proc(name, "worker"))
        for job_id in JOB_IDS[:3]:
            self.user("submit", job_id)

    def close(self) -> None:
        clock.use(self._previous_clock)
        clock.use_store_clock(None)
        self.check.close()
        self.shared.dispose()

    def now(self) -> float:
        return self.t + (self.current.skew if self.current is not None else 0.0)

    # -- processes -----------------------------------------------------------------------
    def _proc(self, name: str, kind: str) -> Proc:
        proc = self.procs[name] = Proc(name, kind, ProcessStore(self.shared))
        return proc

    def _start(self, proc: Proc) -> None:
        self.current = proc
        try:
            proc.crashed, proc.reconciling, proc.last_beat = False, None, -1e9
            liveness = self.locks.view(proc.name, proc.store) if self.locks is not None else None
            if proc.kind == "coordinator":
                proc.obj = Coordinator(proc.store, node_id=proc.name, history_expire_s=HISTORY_EXPIRE_S,
                                       liveness=liveness)
                register_node(proc.store, proc.name, "coordinator")
            else:
                proc.obj = Worker(proc.store, proc.store.url, self.data_dir, node_id=proc.name, slots=2,
                                  launcher=SimLauncher(self, proc.name), liveness=liveness)
                if liveness is not None:     # taken before it registers, as Worker.run does
                    assert liveness.hold(worker_lock(proc.name)), f"{proc.name}'s lock outlived its crash"
                proc.obj.register()
        except StorePartitioned:
            proc.crashed = True       # it cannot start without its store; a later restart may
        finally:
            self.current = None

    def start_driver(self, worker: str, job_id: str, attempt_id: int) -> SimProcess:
        process = SimProcess(self.next_pid)
        self.next_pid += 1
        proc = self._proc(f"d{attempt_id}", "driver")
        proc.skew = self.procs[worker].skew          # same host, same clock
        proc.obj = SimDriver(self, process, proc.store, job_id, attempt_id)
        proc.worker = worker
        self.attempt_runs[attempt_id] = self._run_of(job_id)
        return process

    def _run_of(self, job_id: str) -> str | None:
        with self.shared.read() as conn:
            return conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == job_id)).scalar()

    def new_lineage(self, job_id: str) -> str:
        self.lineages += 1
        return f"{job_id}#{self.lineages}"

    # -- what drivers call back ----------------------------------------------------------
    def after_decision(self, job_id: str, attempt_id: int, pipeline_id: int, batch_id: int) -> None:
        self.check.decision_allowed(job_id, attempt_id, pipeline_id, batch_id)

    def remove_output(self, job_id: str, run_id: str, keys: list[tuple]) -> None:
        """A save mode removes published batches: never one its own run published."""
        for key in keys:
            if self.ledger.runs.get(key) == (job_id, run_id) and key not in self.ledger.removed:
                self.check.fail(f"a save mode of job {job_id} (run {run_id}) removed batch {key[2]} of "
                                f"pipeline {key[1]} that its own run had published")
            self.ledger.removed.add(key)

    def before_publish(self, job_id: str, pipeline_id: int, transaction_id: str) -> int | None:
        """The attempt that decided the batch about to be published (a violation if none did)."""
        return self.check.publish_decided(job_id, pipeline_id, transaction_id)

    def remember(self, driver: SimDriver, what: str, call) -> None:
        self.reports[f"d{driver.attempt_id}"] = (what, call)

    # -- one action ----------------------------------------------------------------------
    def apply(self, action: tuple) -> str:
        kind, target, value, dt = action
        self.t += dt
        self._watch_locks()
        if kind in ("submit", "cancel", "savepoint", "resume"):
            return self.user(kind, target, from_savepoint=value)
        if kind == "restart-store":
            return self.restart_store()
        if kind == "hang-pipeline":
            return self._hang_pipeline(target, value)
        if kind == "deliver":
            return self._deliver(value)
        proc = self.procs.get(target)
        if proc is None:
            return "no such process"
        if kind == "advance":
            return self.advance(proc, value) if proc.runnable else "not runnable"
        return self._fault(kind, proc, value)

    def _fault(self, kind: str, proc: Proc, value: float) -> str:
        if kind == "crash":
            return self._crash(proc)

        if kind == "restart":
            if not proc.crashed or proc.kind == "driver":
                return "not crashed"
            self._start(proc)
            return "restarted"
        if kind == "pause" and (stall := stalls.stall(self, proc, value)) is not None:
            return stall
        if kind == "unpause" and proc.stalled is not None and not stalls.over(self, proc):
            return "still stalled: its job id has no new run yet"
        if kind in ("pause", "unpause"):
            proc.paused = kind == "pause"
        elif kind in ("partition", "heal"):
            proc.store.partitioned = kind == "partition"
        elif kind == "skew":
            proc.skew = value
        elif kind == "jump":
            proc.skew += value
        if kind in ("skew", "jump"):
            self.most_ahead = max(self.most_ahead, proc.skew)
        elif kind in ("duplicate", "delay"):
            report = self.reports.get(proc.name)
            if report is None:
                return "no report to repeat"
            if kind == "delay":
                self.delayed.append((proc.name, *report))
                return f"{report[0]} will arrive again later"
            return self._deliver_one(proc.name, *report)
        return "done"

    def _hang_pipeline(self, job_id: str, roll: float) -> str:
        """One pipeline of the job's current driver hangs in its sink while its others commit.
        STREAMING jobs only: a bounded job's hang is the progress watchdog's (10 min, past the
        quiet phase; its drivers here report no task progress), not the stale window's."""
        with self.client.read() as conn:
            job = conn.execute(select(s.jobs.c.current_attempt, s.jobs.c.mode).where(s.jobs.c.job_id == job_id)).first()
        if job is None or job.mode != "STREAMING":
            return "not a stream"
        proc = self.procs.get(f"d{job.current_attempt}")
        if proc is None or not proc.obj.alive:
            return "no live driver"
        return f"{proc.name}: {proc.obj.hang_pipeline(roll)}"

    def restart_store(self) -> str:
        """The store's server restarts: every session ends, and with it every liveness lock,
        while every process lives. Leaders step down, workers take their locks back in time or
        kill their drivers (fail-stop), and nobody may take a free lock alone as a death."""
        if self.locks is None:
            return "no liveness locks"
        self.locks.restart_store()
        return "every liveness lock freed"

    def _crash(self, proc: Proc) -> str:
        if proc.kind == "driver":
            proc.obj.proc.kill()
            return "killed"
        proc.crashed, proc.reconciling, proc.paused, proc.stalled = True, None, False, None
        if self.locks is not None:      # the OS frees a dead process's locks at once
            self.locks.crash(proc.name)
        if proc.kind == "worker":       # its drivers die with it (PR_SET_PDEATHSIG)
            for other in self.procs.values():
                if other.kind == "driver" and getattr(other, "worker", None) == proc.name:
                    other.obj.proc.kill()
        return "crashed"

    def _deliver(self, index: float) -> str:
        if not self.delayed:
            return "nothing delayed"
        driver, what, call = self.delayed.pop(int(index * len(self.delayed)) % len(self.delayed))
        return self._deliver_one(driver, what, call)

    def _deliver_one(self, driver: str, what: str, call) -> str:
        """A report arrives again: accepted only from the job's current, live attempt."""
        sim: SimDriver = self.procs[driver].obj
        why = self.check.current_attempt(sim.job_id, sim.attempt_id)
        try:
            call()
        except (AttemptFenced, IllegalTransition) as exc:
            return f"late {what} refused: {type(exc).__name__}"
        except StorePartitioned:
            return f"late {what} lost: its driver is cut off from the store"
        if why is not None:
            self.check.fail(f"late {what} of attempt {sim.attempt_id} (job {sim.job_id}) accepted though {why}")
        return f"late {what} accepted"

    # -- users ---------------------------------------------------------------------------
    def user(self, kind: str, job_id: str, from_savepoint: float = 1.0) -> str:
        """``from_savepoint`` (a roll): below 0.25 resume from the newest savepoint, below 0.5 from
        an older one when there is one, else from the latest checkpoints."""
        try:
            if kind == "submit":
                intents.submit(self.client, self.data_dir, text=job_text(job_id), job_id=job_id, actor="sim")
                self.submitted.append(job_id)
            elif kind == "resume":
                savepoint = None
                if from_savepoint < 0.5:
                    ids = savepoint_ids(self.client, job_id)
                    older = ids[:-1] if from_savepoint >= 0.25 and len(ids) > 1 else ids[-1:]
                    savepoint = older[int(from_savepoint * 1000) % len(older)] if older else None
                intents.resume(self.client, job_id, savepoint_id=savepoint, actor="sim")
                return f"resume accepted (from {'savepoint %s' % savepoint if savepoint else 'checkpoints'})"
            else:
                intents.stop(self.client, job_id, savepoint=kind == "savepoint", actor="sim")
            return f"{kind} accepted"
        except intents.Refusal as exc:
            return f"{kind} refused ({exc.kind.name})"

    # -- after faults ----------------------------------------------------------------------
    def quiet(self) -> None:
        """Faults stop: every process back, clocks agree, late reports dropped."""
        self.delayed.clear()
        for proc in list(self.procs.values()):
            proc.paused, proc.skew, proc.store.partitioned = False, 0.0, False     # a stalled leader wakes
            if proc.crashed:
                self._start(proc)

    def round(self, rng: random.Random, dt: float) -> None:
        """Every process takes one step, in a fixed order."""
        self.t += dt
        self._watch_locks()
        for proc in list(self.procs.values()):
            if proc.runnable:
                self.advance(proc, rng.random())


def quiet_logs() -> None:
    logging.getLogger("seatide").setLevel(logging.CRITICAL)
