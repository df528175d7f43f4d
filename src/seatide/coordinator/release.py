"""reconcile_release: "cancel and release", carried out by the leader.

A user asks (``seatide cancel JOB --release``, ``release: true`` on the stop endpoint, the UI's
button): the job is cancelled if it runs, and its ``jobs.release`` says REQUESTED. From then a
resume from its checkpoints is refused (``store/restore.py``): the job can only start fresh.

Once the job is terminal and no driver of it may still run (a slot is dropped only when nothing
reads it), the leader releases, in three steps, each idempotent:

1. decide, in a leader transaction that locks the job row: the job is still that incarnation
   of that run, terminal, release still REQUESTED -> RELEASING. A resume that got in first
   (it clears the request, and starts fresh, which makes its own slot) overrules it; a resume
   after it is refused until the release is done (its compare-and-set sees ``release``);
2. each source drops what it holds for the run (``Source.release``: the replication slot and
   its publication), as history expiry does, so nothing but that run's names is touched,
   through the door (coordinator/door.py): in a leader transaction that holds the job row and
   has re-read it, still that incarnation of that run, RELEASING. A fresh resume keeps the run
   and its slot names, so a row read before a stall (the release since done by another leader,
   the job resumed) must never drop the slot the resumed incarnation made;
3. in that same transaction: record RELEASED, the time, the ``SOURCES_RELEASED`` event, and
   drop the job's ``source_holds`` rows (nothing is held any more).

A failed step 2 (the database down) is retried with backoff, the job staying RELEASING, and
each failure is an event with the reason, masked, and whether trying again can clear it
(``plugin/server_errors.py``: a privilege the user lacks never clears; the event names the fix).
The count goes on across leaders, read from the last such event.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from sqlalchemy import and_, delete, exists, select, update

from seatide.coordinator.source_release import release_sources
from seatide.coordinator.door import DecidedFor, StepOverruled, destructive_step, job_at
from seatide.plugin.server_errors import lasting_fix
from seatide.store import schema as s
from seatide.store.clock import store_now
from seatide.store.db import NotLeader, Store, record_event
from seatide.store.resumable import release_retried
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL

log = logging.getLogger(__name__)

REQUESTED, RELEASING, RELEASED = "REQUESTED", "RELEASING", "RELEASED"
MAX_BACKOFF_S = 60.0


class ReleaseOverruled(Exception):
    """The job moved on (a resume) before the leader decided: nothing is dropped."""


def due_releases(store: Store) -> list:
    """Jobs whose release is asked or under way, terminal, with no driver that may still run."""
    j, a = s.jobs.c, s.attempts.c
    live = exists().where(and_(a.job_id == j.job_id, a.ended_at.is_(None), a.state.in_(sorted(ATTEMPT_LIVE))))
    with store.read() as conn:
        return conn.execute(select(j.job_id, j.incarnation, j.run_id, j.status, j.release, j.config, j.variables)
                            .where(and_(j.release.in_([REQUESTED, RELEASING]), j.status.in_(sorted(JOB_TERMINAL)),
                                        ~live))).all()


@dataclass
class Releaser:
    """The leader's release steps, with a backoff per job (an observation: a new leader retries at once)."""
    store: Store
    actor: str
    _retry_at: dict = field(default_factory=dict)     # job id -> (failures, store time of the next try)

    def step(self, epoch: int, job, now: float) -> None:
        failures, retry_at = self._retry_at.get(job.job_id, (0, 0.0))
        if retry_at > now:
            return
        try:
            if job.release == REQUESTED:
                _decide(self.store, epoch, self.actor, job)
            # The drop, under the door: the row is re-read and must still be this incarnation
            # of this run, RELEASING. A row read before a stall may be long outdated: the release
            # done by another leader, the job resumed fresh, whose new slot has the same name.
            decided = DecidedFor(job.job_id, job.run_id, job.incarnation)
            try:
                with destructive_step(self.store, epoch, decided, job_at(release=RELEASING)) as opened:
                    release_sources(opened.conn, job, self.actor, epoch)
                    _done(opened.conn, epoch, self.actor, job)
            except StepOverruled as exc:
                raise ReleaseOverruled(str(exc)) from None
            log.info("job %s: sources released; it can only be resumed fresh", job.job_id)
            self._retry_at.pop(job.job_id, None)
        except ReleaseOverruled as exc:
            log.info("release of job %s not done: %s", job.job_id, exc)
        except NotLeader:
            raise
        except Exception as exc:  # noqa: BLE001 - retried; the reason is shown, masked, and what it is
            from seatide.secrets import mask_message, secret_values

            if job.job_id not in self._retry_at:    # a new leader counts on from the tries recorded before it
                with self.store.read() as conn:
                    failures = (release_retried(conn, job) or {}).get("tries") or 0
            delay = min(MAX_BACKOFF_S, 2.0 ** failures)
            self._retry_at[job.job_id] = (failures + 1, now + delay)
            reason = mask_message(f"{type(exc).__name__}: {exc}",
                                  secret_values(job.config, json.loads(job.variables or "{}")))[:2000]
            # Retried either way (the fix may come while it waits), but one that trying again never clears is
            # said so, with its fix: the user was told to wait for a server that was up (outside review, F5).
            fix = lasting_fix(exc)
            log.warning("release of job %s failed (try %s), again in %.0f s: %s%s", job.job_id, failures + 1, delay,
                        reason, f" (trying again does not fix it: {fix})" if fix else "")
            with self.store.leader_tx(epoch) as conn:
                record_event(conn, "RELEASE_RETRY", self.actor, job.job_id, job.incarnation, epoch, level="WARNING",
                             tries=failures + 1, error=reason, lasting=fix is not None, **({"fix": fix} if fix else {}))


def _job_key(job):
    return and_(s.jobs.c.job_id == job.job_id, s.jobs.c.incarnation == job.incarnation)


def _decide(store: Store, epoch: int, actor: str, job) -> None:
    with store.leader_tx(epoch) as conn:
        query = select(s.jobs.c.incarnation, s.jobs.c.run_id, s.jobs.c.status, s.jobs.c.release).where(
            s.jobs.c.job_id == job.job_id)
        row = conn.execute(query if store.is_sqlite else query.with_for_update()).first()
        if row is None or (row.incarnation, row.run_id, row.release) != (job.incarnation, job.run_id, REQUESTED) \
                or row.status not in JOB_TERMINAL:
            raise ReleaseOverruled("the job was resumed or forgotten since the release was asked")
        conn.execute(update(s.jobs).where(_job_key(job)).values(release=RELEASING))
        record_event(conn, "RELEASE_DECIDED", actor, job.job_id, job.incarnation, epoch)


def _done(conn, epoch: int, actor: str, job) -> None:
    """Record RELEASED, in the door's transaction (which checked the job is still RELEASING)."""
    h = s.source_holds
    held = [r.holds for r in conn.execute(select(h.c.holds).where(h.c.job_id == job.job_id)) if r.holds]
    now = store_now(conn)
    conn.execute(update(s.jobs).where(and_(_job_key(job), s.jobs.c.release == RELEASING))
                 .values(release=RELEASED, released_at=now))
    conn.execute(delete(h).where(h.c.job_id == job.job_id))
    record_event(conn, "SOURCES_RELEASED", actor, job.job_id, job.incarnation, epoch, released=held,
                 resume="only fresh: seatide resume --fallback fresh")
