"""Which secrets a job's events are masked with, and keeping them masked once those secrets' config goes.

An event is masked by its writer; one written unmasked (by a SeaTide before that, review 3 F5; or a text
with a bare secret value no key names: "asked with password S3cret") is masked where it is shown, with
the secrets of the config its incarnation was given (its job result's) and of the job row's
(``run_secrets``). History expiry deletes those configs: ``forget_job`` the result and the job row,
an earlier incarnation's expiry (``forget_result``) its result alone. Shown after that, such an event
was masked by key alone, and showed its run's password (review 7, F1). So before a config is deleted
the events it masked are rewritten masked with it (``keep_masked``), in the forgetting transaction:
from then on the event itself holds no secret, whatever config is left to mask it with.

What releases left (``left_held`` rows) needs no rewriting: a row keeps the config that left it, and
one adopted from an event (``left_held.adopt``) was masked then with the same ``run_secrets``, all but the
slot's name, kept as named (its identity: the operator dismisses it by it) and masked where it is shown. So a
slot named after a secret variable shows it once its configs are forgotten, as the event's ``holds`` does.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterable

from sqlalchemy import and_, select, update
from sqlalchemy.engine import Connection

from seatide.secrets import mask_message, mask_tree, secret_values
from seatide.store import schema as s

# The names a release's event is matched to its left_held row by, and dismissed by (store/left_held.py
# told_only, dismiss): kept as written when an event is rewritten, so it still finds its row.
_IDENTITY = ("source", "holds")


def run_secrets(conn: Connection, job_id: str | None, incarnations) -> dict:
    """Per incarnation of job ``job_id`` in ``incarnations``: the secrets its events are masked with, those of the
    config that incarnation was given (its job result's, kept after a new run of the id took the job row) and of
    the job row the id has now. An event may have been written unmasked (review 3, F5), and is masked by both
    (review 4, F2: by the job row's alone, a resubmitted id's new config left the old run's password shown).
    The left-behind view and the events API (``views.job_events``: a page of many incarnations, two queries)."""
    J, R = s.jobs.c, s.job_results.c
    job = conn.execute(select(J.config, J.variables).where(J.job_id == job_id)).first()
    current = config_secrets(job.config, job.variables) if job is not None and job.config else frozenset()
    found = dict.fromkeys(incarnations, current)
    asked = [i for i in found if i is not None]
    for row in conn.execute(select(R.incarnation, R.config, R.variables).where(
            and_(R.job_id == job_id, R.incarnation.in_(asked)))).all() if asked else ():
        if row.config:
            found[row.incarnation] = current | config_secrets(row.config, row.variables)
    return found


@lru_cache(maxsize=64)     # a parse each: the UI polls a job's events, and a page's incarnations share configs
def config_secrets(config: str, variables: str | None) -> frozenset:
    return secret_values(config, json.loads(variables or "{}"))


def job_secrets(job) -> frozenset:
    """The secrets of a job row (one with ``config`` and ``variables``; a list row has them only with an error)."""
    return config_secrets(job.config, job.variables) if job.config else frozenset()


def job_error(job) -> str | None:
    """A job row's stored error as a view shows it (job-info, the job lists, SeaTunnel's views, ``seatide run``):
    masked again with its config's secrets, for a row written before drivers masked, or unmasked by a writer that
    did not know them. ``job``: a row with ``error_msg``, ``config`` and ``variables``."""
    if not job.error_msg:
        return job.error_msg
    return mask_message(job.error_msg, job_secrets(job))


def job_name(job) -> str:
    """A job row's name as a view shows it: a name made of a secret variable (``job.name = "nightly-${tenant}"``)
    is recorded masked (``intents.submit``); one recorded before that is masked here (review 8, F5)."""
    return mask_message(job.name, job_secrets(job)) if job.name else job.name


def event_detail(text: str | None, secrets: frozenset) -> Any:
    """An event's detail, read and then masked (``mask_tree``): its JSON text masked as a message lost pairs
    inside its strings, and a masked escaped quote left text that no longer read as JSON."""
    try:
        return mask_tree(json.loads(text), secrets)
    except (TypeError, ValueError):
        return mask_message(text, secrets)     # written by hand or by an older version: shown as it is, masked


def keep_masked(conn: Connection, job_id: str, incarnations: Iterable[int] | None) -> int:
    """Before configs of job ``job_id`` are deleted: rewrite its events masked with the secrets they are shown
    with now (``run_secrets``), in the caller's (forgetting) transaction; how many changed. ``incarnations``:
    those whose job results go; None: the job row goes too, whose secrets mask every event of the id."""
    E = s.events.c
    query = select(E.seq, E.incarnation, E.detail).where(E.job_id == job_id)
    if incarnations is not None:
        query = query.where(E.incarnation.in_(sorted(set(incarnations))))
    events = conn.execute(query).all()
    secrets = run_secrets(conn, job_id, {e.incarnation for e in events})
    changed = 0
    for event in events:
        masked = _masked_text(event.detail, secrets[event.incarnation])
        if masked is not None:
            conn.execute(update(s.events).where(E.seq == event.seq).values(detail=masked))
            changed += 1
    return changed


def _masked_text(text: str | None, secrets: frozenset) -> str | None:
    """``text`` (an event's stored detail) masked with ``secrets``; None when masking changes nothing."""
    try:
        detail = json.loads(text)
    except (TypeError, ValueError):
        masked = mask_message(text, secrets)
        return None if masked == text else masked
    masked = mask_tree(detail, secrets)
    if isinstance(detail, dict) and isinstance(masked, dict):
        masked.update({key: detail[key] for key in _IDENTITY if key in detail})
    return None if masked == detail else json.dumps(masked, default=str)


__all__ = ["config_secrets", "event_detail", "job_error", "job_name", "job_secrets", "keep_masked", "run_secrets"]
