"""The control plane's guarantees, checked against the store (and the simulated sinks'
ledger) after every simulated step, and once more when faults have stopped.

* a terminal status never changes;
* a job has at most one live attempt, and only its current attempt decides a sink batch or
  reports; nothing is published that was not decided;
* every committed batch is published once and recorded once;
* no write carries a stale epoch (the event log's epochs never go back);
* a CANCELED incarnation never gets another attempt;
* once faults stop, every job is terminal or RUNNING with fresh checkpoints;
* after cleanup and history expiry nothing of the job is left.
"""

from __future__ import annotations

import os

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.db import Store
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, PIPELINE_TERMINAL

# A RUNNING job's newest checkpoint may be this old at the end of the quiet phase.
FRESH_CHECKPOINT_S = 20.0


class Invariants:
    def __init__(self, store: Store):
        self.store = store
        self.violations: list[str] = []
        self.terminal: dict[tuple[str, int], str] = {}
        self.canceled: dict[tuple[str, int], int] = {}       # -> its number of attempts then
        self.last_seq = 0
        self.max_epoch = 0

    def fail(self, message: str) -> None:
        self.violations.append(message)

    # -- after every step ----------------------------------------------------------------
    def after_step(self) -> None:
        with self.store.read() as conn:
            self._terminal_is_forever(conn)
            self._one_live_attempt(conn)
            self._checkpoints_once(conn)
            self._event_log(conn)

    def _terminal_is_forever(self, conn) -> None:
        # Keyed by run: a job id submitted again after its history expired is a new run, which
        # starts again at incarnation 1 (store/runs.py); the dead run's incarnation stays ended.
        for job in conn.execute(select(s.jobs.c.job_id, s.jobs.c.run_id, s.jobs.c.incarnation, s.jobs.c.status)):
            key = (job.job_id, job.incarnation, job.run_id)
            was = self.terminal.get(key)
            if was is not None and job.status != was:
                self.fail(f"job {key[0]} incarnation {key[1]} (run {key[2]}) left terminal {was} for {job.status}")
            elif was is None and job.status in JOB_TERMINAL:
                self.terminal[key] = job.status
            if job.status == "CANCELED" and key not in self.canceled:
                self.canceled[key] = self._attempts(conn, key)
        for key, count in self.canceled.items():
            now = self._attempts(conn, key)
            if now > count:
                self.fail(f"job {key[0]} incarnation {key[1]} got a new attempt after it was CANCELED")
                self.canceled[key] = now

    @staticmethod
    def _attempts(conn, key) -> int:
        """Attempts of the run's incarnation (none once the run is forgotten)."""
        run = conn.execute(select(s.jobs.c.run_id).where(s.jobs.c.job_id == key[0])).scalar()
        if run != key[2]:
            return 0
        return conn.execute(select(func.count()).select_from(s.attempts).where(and_(
            s.attempts.c.job_id == key[0], s.attempts.c.incarnation == key[1]))).scalar()

    def _one_live_attempt(self, conn) -> None:
        for row in conn.execute(select(s.attempts.c.job_id, func.count().label("n")).where(
                s.attempts.c.state.in_(sorted(ATTEMPT_LIVE))).group_by(s.attempts.c.job_id)
                .having(func.count() > 1)):
            self.fail(f"job {row.job_id} has {row.n} live attempts at once")

    def _checkpoints_once(self, conn) -> None:
        c = s.checkpoints.c
        for row in conn.execute(select(c.job_id, c.incarnation, c.pipeline_id, c.batch_id).where(and_(
                c.kind == "CHECKPOINT", c.status == "COMPLETED"))
                .group_by(c.job_id, c.incarnation, c.pipeline_id, c.batch_id).having(func.count() > 1)):
            self.fail(f"batch {row.batch_id} of job {row.job_id} pipeline {row.pipeline_id} "
                      f"recorded more than once")

    def _event_log(self, conn) -> None:
        for event in conn.execute(select(s.events).where(s.events.c.seq > self.last_seq).order_by(s.events.c.seq)):
            self.last_seq = event.seq
            if event.epoch is not None:
                if event.epoch < self.max_epoch:
                    self.fail(f"event {event.seq} {event.kind} of job {event.job_id} written with stale epoch "
                              f"{event.epoch} (epoch {self.max_epoch} already acted)")
                self.max_epoch = max(self.max_epoch, event.epoch)
            if event.kind == "RECONCILE_ERROR":
                self.fail(f"reconcile of job {event.job_id} raised: {event.detail}")

    # -- around a driver's write ---------------------------------------------------------
    def current_attempt(self, job_id: str, attempt_id: int) -> str | None:
        """None if the attempt may write for its job now, else why not."""
        with self.store.read() as conn:
            job = conn.execute(select(s.jobs.c.current_attempt, s.jobs.c.status).where(
                s.jobs.c.job_id == job_id)).first()
            state = conn.execute(select(s.attempts.c.state).where(s.attempts.c.attempt_id == attempt_id)).scalar()
        if job is None:
            return "the job is gone"
        if job.current_attempt != attempt_id:
            return f"attempt {job.current_attempt} is current"
        if state not in ATTEMPT_LIVE:
            return f"it is {state}"
        return None

    def decision_allowed(self, job_id: str, attempt_id: int, pipeline_id: int, batch_id: int) -> None:
        """Called right after a decision was written (a simulated step is atomic)."""
        why = self.current_attempt(job_id, attempt_id)
        if why is not None:
            self.fail(f"attempt {attempt_id} decided batch {batch_id} of job {job_id} pipeline {pipeline_id} "
                      f"though {why}")

    def publish_decided(self, job_id: str, pipeline_id: int, transaction_id: str) -> int | None:
        """The attempt whose decision is about to be published; a violation when there is none."""
        m = s.sink_manifests.c
        with self.store.read() as conn:
            decided = conn.execute(select(m.attempt_id).where(and_(
                m.job_id == job_id, m.pipeline_id == pipeline_id, m.transaction_id == transaction_id))).scalar()
        if decided is None:
            self.fail(f"batch {transaction_id} of job {job_id} pipeline {pipeline_id} published without a decision")
        return decided

    def published_once(self, published: dict) -> None:
        for (lineage, pipeline_id, batch_id), attempts in published.items():
            if len(attempts) > 1:
                self.fail(f"batch {batch_id} of {lineage} pipeline {pipeline_id} published {len(attempts)} "
                          f"times (attempts {attempts})")

    # -- once faults have stopped --------------------------------------------------------
    def converged(self, now: float) -> list[str]:
        """Why some job has not converged (empty when every one has): a job not yet ended is a
        RUNNING stream each of whose pipelines checkpoints. Each pipeline, not the job's newest
        checkpoint: a pipeline whose sink hangs must be seen and its attempt replaced, however
        well the others do (issue 30, finding 10)."""
        problems = []
        with self.store.read() as conn:
            for job in conn.execute(select(s.jobs)):
                if job.status in JOB_TERMINAL:
                    continue
                if job.status != "RUNNING" or job.mode != "STREAMING":
                    problems.append(f"job {job.job_id} is still {job.status} ({job.mode})")
                    continue
                for p in conn.execute(select(s.pipelines).where(and_(
                        s.pipelines.c.job_id == job.job_id, s.pipelines.c.incarnation == job.incarnation,
                        s.pipelines.c.status.notin_(sorted(PIPELINE_TERMINAL))))):
                    last = p.last_checkpoint_at
                    if last is None or now - last > FRESH_CHECKPOINT_S:
                        age = "none" if last is None else f"{now - last:.0f} s old"
                        problems.append(f"job {job.job_id} is RUNNING without fresh checkpoints of pipeline "
                                        f"{p.pipeline_id} (newest {age})")
        return problems

    def nothing_left(self, job_ids: list[str], data_dir: str) -> None:
        tables = (s.jobs, s.pipelines, s.attempts, s.checkpoints, s.job_results, s.source_ends,
                  s.sink_manifests)
        with self.store.read() as conn:
            for job_id in job_ids:
                left = [t.name for t in tables if conn.execute(
                    select(func.count()).select_from(t).where(t.c.job_id == job_id)).scalar()]
                if left:
                    self.fail(f"job {job_id}: rows left in {', '.join(left)} after cleanup and history expiry")
                root = os.path.join(data_dir, "checkpoints", job_id)
                files = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
                if files:
                    self.fail(f"job {job_id}: {len(files)} files left under {root} after history expiry "
                              f"(e.g. {sorted(files)[0]})")
