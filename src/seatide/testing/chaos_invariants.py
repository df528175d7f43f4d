"""What a chaos run checks (``chaos.py`` lists the invariants), and the report it fills.

A mixin of ``Chaos``, apart from the faults (``chaos_faults.py``): the checks read the store,
the sink output and the drivers sampled all along, never the fault schedule.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import select

from seatide.store import schema as s
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, JobStatus
from seatide.testing.driver_processes import attempt_of, drivers_by_job
from seatide.testing.jobs import written_ids


@dataclass
class ChaosJob:
    job_id: str
    mode: str                 # BATCH | STREAMING
    out: str
    rows: int = 0             # BATCH: ids 0 .. rows-1
    stopped: bool = False     # cancelled or savepointed by chaos: resumed later


@dataclass
class ChaosReport:
    seed: int
    faults: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)     # timings worth a line of their own
    jobs: int = 0

    def line(self) -> str:
        return f"chaos: seed={self.seed} faults={len(self.faults)} jobs={self.jobs} violations={len(self.violations)}"


class Invariants:
    """The checks of a run, mixed into ``Chaos``: sampled all along, then run once it has settled."""

    def _violation(self, job: ChaosJob | None, text: str) -> None:
        message = f"{job.job_id}: {text}" if job else text
        if message not in self.report.violations:
            self.report.violations.append(message)

    def _sample_attempts(self) -> None:
        """A job never has two live attempts, nor two driver processes, at any moment we look."""
        while not self._sampler_stop.wait(0.2):
            for job_id, pids in drivers_by_job(self.cluster.store_urls()).items():
                if len(pids) > 1 and (job_id, *sorted(pids)) not in self.overlaps:   # once each
                    self.overlaps.add((job_id, *sorted(pids)))
                    self._judge_overlap(job_id, pids)
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

    def _judge_overlap(self, job_id: str, pids: list[int]) -> None:
        """Two driver processes of one job are a violation when two of them could run it: a
        driver whose attempt has ended and that never marked it running (its first store write,
        which an ended attempt refuses) can neither run nor commit; it is on its way out (a
        driver still starting when its host was cut off and its attempt declared lost). Such an
        overlap is written down as measured, not as a violation; one with the store unread is a
        violation (nothing shows that the driver is harmless)."""
        named, harmless = self._drivers_named(pids)
        line = f"{job_id}: {len(pids)} driver processes at once ({named})"
        if len(pids) - harmless <= 1:
            self.report.measured.append(line + ": all but one can never run")
        else:
            self._violation(None, line)

    def _drivers_named(self, pids: list[int]) -> tuple[str, int]:
        """Each driver with its attempt as the store has it at that moment, and how many of them
        are on their way out (attempt ended, never marked running)."""
        attempts = {pid: attempt_of(pid) for pid in pids}
        rows = {}
        try:
            with self.cluster.store.read() as conn:
                rows = {row.attempt_id: row for row in conn.execute(
                    select(s.attempts.c.attempt_id, s.attempts.c.state, s.attempts.c.heartbeat_at).where(
                        s.attempts.c.attempt_id.in_([a for a in attempts.values() if a is not None])))}
        except Exception:       # the store down or restarting: the pids and attempts alone
            pass
        named, harmless = [], 0
        for pid in sorted(pids):
            row = rows.get(attempts[pid])
            state = "state unread" if row is None else (
                row.state + ("" if row.heartbeat_at is not None else ", never marked running"))
            named.append(f"pid {pid} attempt {attempts[pid]} {state}")
            harmless += row is not None and row.state not in ATTEMPT_LIVE and row.heartbeat_at is None
        return "; ".join(named), harmless

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
