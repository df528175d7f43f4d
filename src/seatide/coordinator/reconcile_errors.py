"""One job's reconcile failure, told: its RECONCILE_ERROR event and its log line, both masked with the job's
secrets (review 8, F9). A connector's exception may quote what it connected with (a URL with its password, a
DSN), and the coordinator's snapshot of the job holds no config to mask it with: the secrets are read here, in
the event's transaction. Masked first, then cut to the event's length: cut first, a secret across the cut was
masked no more.
"""

from __future__ import annotations

import logging

from seatide.secrets import mask_failure, mask_message
from seatide.store.db import NotLeader, Store, record_event
from seatide.store.event_masking import run_secrets

log = logging.getLogger("seatide.coordinator.service")      # where these lines were written before: kept for readers

MAX_EVENT_ERROR = 2000


def tell_reconcile_error(store: Store, epoch: int, actor: str, job, exc: BaseException, delay: float) -> None:
    """Record ``exc``, job ``job``'s reconcile failure (retried in ``delay`` s), as an event and a log line."""
    secrets: frozenset = frozenset()
    try:
        with store.leader_tx(epoch) as conn:
            secrets = run_secrets(conn, job.job_id, {job.incarnation})[job.incarnation]
            record_event(conn, "RECONCILE_ERROR", actor, job.job_id, job.incarnation, epoch, level="ERROR",
                         error=mask_message(f"{type(exc).__name__}: {exc}", secrets)[:MAX_EVENT_ERROR],
                         retry_in=round(delay, 1))
    except NotLeader:
        raise
    except Exception:
        log.exception("job %s: the reconcile error could not be recorded", job.job_id)
    finally:
        log.error("job %s: reconcile failed (retrying in %.1f s)\n%s", job.job_id, delay, mask_failure(exc, secrets))


__all__ = ["tell_reconcile_error"]
