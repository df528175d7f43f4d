"""Whether a job can be resumed at all, before any pipeline's checkpoint is looked at.

A FINISHED job has nothing to resume; a job whose history is expiring has lost its checkpoints; a
job still run by a live driver recovers by itself; a released job's sources' positions are gone,
so it can only start over (``coordinator/release.py``). ``store/restore.py`` asks these first.
"""

from __future__ import annotations

import json
import socket
import time

from sqlalchemy import and_, select

from seatide.store import schema as s
from seatide.store.clock import read_store_now
from seatide.store.job_ids import RestoreRefused
from seatide.store.jobs import JobRefused
from seatide.store.states import ATTEMPT_LIVE, CleanupState, JobStatus
from seatide.timeouts import Timeouts

RESUMABLE = (JobStatus.CANCELED, JobStatus.FAILED, JobStatus.SAVEPOINT_DONE)


def check_resumable(conn, job, timeouts: Timeouts) -> None:
    """Refuse a resume that cannot be one: a FINISHED job, a job whose history is being
    expired, and a job still run by a live driver (it recovers by itself).

    Whether that driver is live is judged as the leader judges it, by heartbeats on the
    store's clock (``Timeouts``). This is the answer to the user only: the leader still holds
    the new incarnation's first driver until every earlier one is surely gone."""
    if job.status == JobStatus.FINISHED:
        raise JobRefused(f"job {job.job_id} FINISHED; there is nothing to resume (submit it again to rerun it)")
    refuse_if_expiring(conn, job)
    if job.status in RESUMABLE:
        return
    attempt = None
    if job.current_attempt is not None:
        attempt = conn.execute(select(s.attempts).where(s.attempts.c.attempt_id == job.current_attempt)).first()
    if attempt is None or attempt.state not in ATTEMPT_LIVE or _silent(conn, attempt, timeouts):
        return   # killed: nothing runs it any more
    raise JobRefused(f"job {job.job_id} is {job.status} with a live driver (attempt {attempt.attempt_id}); "
                     "a running job recovers by itself. Cancel it or stop it with a savepoint first")


def release_retried(conn, job) -> dict | None:
    """The newest RELEASE_RETRY event of the job's incarnation (its ``tries``, ``error``, and ``at``), or None."""
    e = s.events.c
    row = conn.execute(select(e.at, e.detail).where(and_(
        e.job_id == job.job_id, e.incarnation == job.incarnation, e.kind == "RELEASE_RETRY"))
        .order_by(e.seq.desc()).limit(1)).first()
    return None if row is None else {**json.loads(row.detail or "{}"), "at": row.at}


def refuse_released(job, fallback: str, retried: dict | None = None) -> None:
    """A released job (``coordinator/release.py``) resumes only fresh: its sources' positions are gone.
    ``retried``: the release's last failure (``release_retried``). The leader retries a failed drop until
    the server can be reached, for as long as it is down: the refusal says so, and why, rather than "seconds"
    to a user who asks again and again (outside review 9, F4). An error that trying again never clears (a
    privilege the source's user lacks: ``lasting``) is said to be one, with its fix."""
    if job.release == "RELEASING" and retried is not None:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(retried["at"]))
        tries, error = retried.get("tries"), " ".join(str(retried.get("error")).split())    # libpq's hint: a line
        wait = (f"trying again does not fix it: {retried.get('fix')}; the leader tries again meanwhile" if
                retried.get("lasting") else "the leader tries again until the server can be reached")
        raise JobRefused(f"job {job.job_id}'s sources are being released (cancel and release), and its release has "
                         f"failed {tries} time{'' if tries == 1 else 's'}, the last at {at} UTC: {error}; {wait}; "
                         f"resume it with --fallback fresh once the release is done (`seatide status {job.job_id}`)")
    if job.release == "RELEASING":
        raise JobRefused(f"job {job.job_id}'s sources are being released right now; once that is done (seconds) it "
                         f"can start over fresh: seatide resume {job.job_id} --fallback fresh")
    if fallback != "fresh":
        what = "were released" if job.release == "RELEASED" else "are being released (cancel and release)"
        raise RestoreRefused(f"cannot resume job {job.job_id} from its checkpoints: its sources' positions {what} "
                             "(a Postgres-CDC replication slot is dropped), so the changes since its last checkpoint "
                             f"cannot be read again. Start it over with a new snapshot: seatide resume {job.job_id} "
                             "--fallback fresh (REST: \"fallback\": \"fresh\")")


def refuse_if_expiring(conn, job) -> None:
    cleanup = conn.execute(select(s.job_results.c.cleanup).where(and_(
        s.job_results.c.job_id == job.job_id, s.job_results.c.incarnation == job.incarnation))).scalar()
    if cleanup == CleanupState.EXPIRING:
        raise JobRefused(f"job {job.job_id}'s history is expiring: its checkpoints are being removed and it can "
                         "no longer be resumed; submit it again to rerun it")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def _silent(conn, attempt, timeouts: Timeouts) -> bool:
    """The worker reaped it; or both ran on this host and are gone from its process table; or
    its worker is lost and its driver has been silent long enough to have fenced itself off
    (both by the store's clock), as the leader's ``process_gone`` judges."""
    if attempt.ended_at is not None:
        return True
    worker = conn.execute(select(s.nodes).where(s.nodes.c.node_id == attempt.worker_id)).first()
    if worker is not None and worker.host == socket.gethostname():
        # On this host the process table says it (``seatide run`` killed, resumed at once).
        return not _alive(worker.pid) and not (attempt.pid and _alive(attempt.pid))
    now = read_store_now(conn)
    worker_lost = worker is None or worker.stopped or now - worker.heartbeat_at > timeouts.worker_lost_after
    return worker_lost and now - (attempt.heartbeat_at or attempt.created_at) > timeouts.driver_stops_within


__all__ = ["RESUMABLE", "check_resumable", "refuse_if_expiring", "refuse_released", "release_retried"]
