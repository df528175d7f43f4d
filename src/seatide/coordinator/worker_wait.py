"""Said when jobs wait for a worker that heads the store's revision: a rolling upgrade's silent stall.

The leader gives a job only to a live worker whose code heads the store's current revision (reconcile.py
``choose_worker``, store/node_features.py). While only workers of another release are up (older ones during an
upgrade, or newer ones' store not yet theirs), a job waits PENDING with no attempt; nothing else would say why.

So the leader records one ``WORKER_AWAITED`` event per job and reason (the reason names the revision and what the
live workers said they head), not one a tick: a job's latest event already saying it is enough, so a new leader
does not say it again either. And it logs a WARNING for all such jobs at most once every ``LOG_EVERY_S``.
A decision is still reconcile.py's alone: this only reads the snapshot the decision was made on.
"""

from __future__ import annotations

import json
import logging

from sqlalchemy import and_, select

from seatide.coordinator.reconcile import Snapshot, worker_alive
from seatide.store import schema as s
from seatide.store.db import Store, record_event
from seatide.store.node_features import heads_store
from seatide.store.states import JobStatus
from seatide.timeouts import Timeouts

log = logging.getLogger(__name__)

KIND = "WORKER_AWAITED"
LOG_EVERY_S = 60.0      # store time between two WARNINGs about waiting jobs


def no_worker_heads_store(snap: Snapshot, timeouts: Timeouts) -> str | None:
    """Why a PENDING job due for an attempt gets none, when the cause is that no live worker (of those it may go
    to) heads the store's revision while some live one of another release is there; else None."""
    job = snap.job
    if job.status != JobStatus.PENDING or snap.now < (job.next_attempt_at or 0.0):
        return None
    live = [n for n in snap.workers.values() if worker_alive(n, snap, timeouts)
            and (not job.pinned_worker or n.node_id == job.pinned_worker)]
    # choose_worker takes only workers that head the store: with none among the live ones, it has none to give.
    if not live or any(heads_store(n, snap.store_revision) for n in live):
        return None
    has = ", ".join(f"{n.node_id} has: {n.features or 'no features'}" for n in sorted(live, key=lambda n: n.node_id))
    pinned = f"; the job is pinned to worker {job.pinned_worker}" if job.pinned_worker else ""
    return f"no live worker heads store revision {snap.store_revision} ({has}){pinned}"


class WorkerWait:
    """The leader's word on jobs that wait for a worker of the store's revision (one per coordinator)."""

    def __init__(self, store: Store, actor: str, timeouts: Timeouts):
        self.store, self.actor, self.timeouts = store, actor, timeouts
        self._waiting: dict[str, tuple[int, str, float]] = {}    # job id -> (incarnation, reason, store time seen)
        self._logged_at: float | None = None                     # store time of the last WARNING
        self._pass_now: float | None = None                      # the store time of the pass being seen

    def see(self, epoch: int, snap: Snapshot) -> None:
        """After a decision that changed nothing: say so if the job waits for such a worker."""
        if snap.now != self._pass_now:           # a new pass: the last one's waiting jobs are all known
            self._log(self._pass_now)
            self._pass_now = snap.now
        job = snap.job
        reason = no_worker_heads_store(snap, self.timeouts)
        if reason is None:
            self._waiting.pop(job.job_id, None)
            return
        said = self._waiting.get(job.job_id)
        self._waiting[job.job_id] = (job.incarnation, reason, snap.now)
        if said is None or said[:2] != (job.incarnation, reason):
            self._record(epoch, job, reason)

    def _record(self, epoch: int, job, reason: str) -> None:
        e = s.events.c
        with self.store.leader_tx(epoch) as conn:
            last = conn.execute(select(e.kind, e.detail).where(and_(
                e.job_id == job.job_id, e.incarnation == job.incarnation)).order_by(e.seq.desc()).limit(1)).first()
            if last is not None and last.kind == KIND and json.loads(last.detail).get("reason") == reason:
                return          # said already (by this leader before a restart, or by another)
            record_event(conn, KIND, self.actor, job.job_id, job.incarnation, epoch, reason=reason)

    def _log(self, last_pass: float | None) -> None:
        """The WARNING about the jobs seen waiting in the pass that ran at ``last_pass`` (store time)."""
        # A job not seen in that pass (it got a worker, ended, was forgotten) is not counted, nor kept.
        self._waiting = {job: entry for job, entry in self._waiting.items() if entry[2] == last_pass}
        if not self._waiting or (self._logged_at is not None and last_pass - self._logged_at < LOG_EVERY_S):
            return
        self._logged_at = last_pass
        by_reason: dict[str, int] = {}
        for _incarnation, reason, _seen in self._waiting.values():
            by_reason[reason] = by_reason.get(reason, 0) + 1
        for reason, count in sorted(by_reason.items()):
            log.warning("%d job%s wait%s: %s", count, "s" if count != 1 else "", "" if count != 1 else "s", reason)
