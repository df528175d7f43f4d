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
import sqlite3

from sqlalchemy import and_, func, select

from seatide.store import schema as s
from seatide.store.address import OPEN_WAIT_S
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
        # The simulation's store is one SQLite file; the checker only reads it (isolation_level
        # None: it issues BEGIN itself, as the store does).
        self._raw = sqlite3.connect(store.engine.url.database, isolation_level=None)
        self._raw.execute(f"PRAGMA busy_timeout={int(OPEN_WAIT_S * 1000)}")
        self._seen_version = None

    def close(self) -> None:
        self._raw.close()

    def fail(self, message: str) -> None:
        self.violations.append(message)

    # -- after every step ----------------------------------------------------------------
    # One plain SELECT a table, on the checker's own SQLite connection, then every check over
    # the rows in Python: building a query a check (and one a CANCELED incarnation, each step)
    # was half of a run's time. The connection's data_version moves whenever another
    # connection commits, so a step that committed nothing (a follower's tick, a fault on a
    # paused process) leaves the store as the last check saw it and is not read again.
    _JOBS = "SELECT job_id, run_id, incarnation, status FROM jobs"
    _ATTEMPTS = ("SELECT job_id, incarnation, count(*), sum(state IN (%s)) FROM attempts "
                 "GROUP BY job_id, incarnation" % ", ".join(f"'{state}'" for state in sorted(ATTEMPT_LIVE)))
    _TWICE_RECORDED = ("SELECT job_id, pipeline_id, batch_id FROM checkpoints "
                       "WHERE kind = 'CHECKPOINT' AND status = 'COMPLETED' "
                       "GROUP BY job_id, incarnation, pipeline_id, batch_id HAVING count(*) > 1")
    _EVENTS = "SELECT seq, kind, job_id, epoch, detail FROM events WHERE seq > ? ORDER BY seq"

    def after_step(self) -> None:
        version = self._raw.execute("PRAGMA data_version").fetchone()[0]
        if version == self._seen_version:
            return
        self._seen_version = version
        self._raw.execute("BEGIN")
        try:
            jobs = self._raw.execute(self._JOBS).fetchall()
            attempts = self._raw.execute(self._ATTEMPTS).fetchall()
            twice = self._raw.execute(self._TWICE_RECORDED).fetchall()
            events = self._raw.execute(self._EVENTS, (self.last_seq,)).fetchall()
        finally:
            self._raw.execute("COMMIT")
        runs = {job_id: run_id for job_id, run_id, _, _ in jobs}
        counts = {(job_id, incarnation): n for job_id, incarnation, n, _ in attempts}
        self._terminal_is_forever(jobs, lambda key: counts.get(key[:2], 0) if runs.get(key[0]) == key[2] else 0)
        self._one_live_attempt(attempts)
        for job_id, pipeline_id, batch_id in twice:
            self.fail(f"batch {batch_id} of job {job_id} pipeline {pipeline_id} recorded more than once")
        self._event_log(events)

    def _terminal_is_forever(self, jobs, attempts) -> None:
        """``attempts(key)``: attempts of the run's incarnation (none once the run is forgotten)."""
        # Keyed by run: a job id submitted again after its history expired is a new run, which
        # starts again at incarnation 1 (store/runs.py); the dead run's incarnation stays ended.
        for job_id, run_id, incarnation, status in jobs:
            key = (job_id, incarnation, run_id)
            was = self.terminal.get(key)
            if was is not None and status != was:
                self.fail(f"job {key[0]} incarnation {key[1]} (run {key[2]}) left terminal {was} for {status}")
            elif was is None and status in JOB_TERMINAL:
                self.terminal[key] = status
            if status == "CANCELED" and key not in self.canceled:
                self.canceled[key] = attempts(key)
        for key, count in self.canceled.items():
            now = attempts(key)
            if now > count:
                self.fail(f"job {key[0]} incarnation {key[1]} got a new attempt after it was CANCELED")
                self.canceled[key] = now

    def _one_live_attempt(self, attempts) -> None:
        live: dict[str, int] = {}
        for job_id, _, _, n in attempts:
            live[job_id] = live.get(job_id, 0) + n
        for job_id, n in live.items():
            if n > 1:
                self.fail(f"job {job_id} has {n} live attempts at once")

    def _event_log(self, events) -> None:
        for seq, kind, job_id, epoch, detail in events:
            self.last_seq = seq
            if epoch is not None:
                if epoch < self.max_epoch:
                    self.fail(f"event {seq} {kind} of job {job_id} written with stale epoch "
                              f"{epoch} (epoch {self.max_epoch} already acted)")
                self.max_epoch = max(self.max_epoch, epoch)
            if kind == "RECONCILE_ERROR":
                self.fail(f"reconcile of job {job_id} raised: {detail}")

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
