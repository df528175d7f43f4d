"""The state machines of jobs, pipelines and attempts: one table each, checked on every write.

A write that is not in its table is a bug, not a condition to handle: ``check_*`` raises
``IllegalTransition``. Terminal states have no way out; a resume is a new incarnation.

Each machine's states are one ``StrEnum``: a member is its own name as a string, so it is
stored, compared with what the store gives back and shown exactly as before, while a typo in
code is an ``AttributeError`` at once instead of a state no table knows.
"""

from __future__ import annotations

from enum import StrEnum


class IllegalTransition(AssertionError):
    pass


# -- jobs (SeaTunnel's names) ----------------------------------------------------------
class JobStatus(StrEnum):
    CREATED = "CREATED"
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    DOING_SAVEPOINT = "DOING_SAVEPOINT"
    CANCELING = "CANCELING"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    SAVEPOINT_DONE = "SAVEPOINT_DONE"


J = JobStatus
JOB_TERMINAL = frozenset({J.FAILED, J.CANCELED, J.FINISHED, J.SAVEPOINT_DONE})
JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    J.CREATED: frozenset({J.PENDING, J.CANCELED}),
    J.PENDING: frozenset({J.SCHEDULED, J.CANCELING, J.CANCELED, J.FAILED, J.DOING_SAVEPOINT}),
    J.SCHEDULED: frozenset({J.RUNNING, J.FAILING, J.CANCELING, J.DOING_SAVEPOINT} | JOB_TERMINAL),
    J.RUNNING: frozenset({J.FAILING, J.CANCELING, J.DOING_SAVEPOINT} | JOB_TERMINAL),
    J.FAILING: frozenset({J.PENDING, J.FAILED, J.CANCELING, J.CANCELED, J.DOING_SAVEPOINT}),
    J.DOING_SAVEPOINT: frozenset({J.FAILING, J.CANCELING} | JOB_TERMINAL),
    J.CANCELING: frozenset({J.CANCELED, J.FAILED, J.FINISHED}),
    **{state: frozenset() for state in JOB_TERMINAL},
}
JOB_ACTIVE = frozenset({J.SCHEDULED, J.RUNNING, J.DOING_SAVEPOINT, J.CANCELING})


# -- desired state, written by users (any process), acted on by the leader ---------------
class Desired(StrEnum):
    RUN = "RUN"
    CANCEL = "CANCEL"
    SAVEPOINT = "SAVEPOINT"


DESIRED = tuple(Desired)


# -- pipelines -------------------------------------------------------------------------
class PipelineStatus(StrEnum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    SAVEPOINT_DONE = "SAVEPOINT_DONE"   # stopped after a committed batch on request; a resume restarts it


P = PipelineStatus
PIPELINE_TERMINAL = frozenset({P.FINISHED, P.FAILED, P.CANCELED, P.SAVEPOINT_DONE})
PIPELINE_TRANSITIONS: dict[str, frozenset[str]] = {
    P.CREATED: frozenset({P.RUNNING} | PIPELINE_TERMINAL),
    P.RUNNING: frozenset({P.CREATED} | PIPELINE_TERMINAL),   # CREATED: its attempt was lost
    **{state: frozenset() for state in PIPELINE_TERMINAL},
}


# -- attempts --------------------------------------------------------------------------
class AttemptState(StrEnum):
    ASSIGNED = "ASSIGNED"
    LAUNCHING = "LAUNCHING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LOST = "LOST"


A = AttemptState
ATTEMPT_LIVE = frozenset({A.ASSIGNED, A.LAUNCHING, A.RUNNING})
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    A.ASSIGNED: frozenset({A.LAUNCHING, A.LOST, A.FAILED}),
    A.LAUNCHING: frozenset({A.RUNNING, A.SUCCEEDED, A.FAILED, A.LOST}),
    A.RUNNING: frozenset({A.SUCCEEDED, A.FAILED, A.LOST}),
    A.SUCCEEDED: frozenset(),
    A.FAILED: frozenset(),
    A.LOST: frozenset(),
}


# -- a terminal job's result: cleaned up once, then expired --------------------------------
class CleanupState(StrEnum):
    DIRTY = "DIRTY"         # its cleanup is due at next_cleanup_at
    CLEAN = "CLEAN"         # cleaned; its history expires at expires_at
    # Its expiry is decided (under the lease): what it removes is no longer the job's to use.
    # A resume is refused from here on, so nothing can start from a directory being removed.
    EXPIRING = "EXPIRING"


def final_job_status(pipeline_statuses: list[str], savepoint_requested: bool) -> JobStatus:
    """A job's end from its pipelines: FAILED > CANCELED > SAVEPOINT_DONE > FINISHED."""
    if P.FAILED in pipeline_statuses:
        return J.FAILED
    if P.CANCELED in pipeline_statuses:
        return J.CANCELED
    if savepoint_requested:
        return J.SAVEPOINT_DONE
    return J.FINISHED


def _check(table: dict[str, frozenset[str]], what: str, old: str, new: str) -> None:
    if new not in table.get(old, frozenset()):
        raise IllegalTransition(f"{what} cannot go from {old} to {new}")


def check_job(old: str, new: str) -> None:
    _check(JOB_TRANSITIONS, "a job", old, new)


def check_pipeline(old: str, new: str) -> None:
    _check(PIPELINE_TRANSITIONS, "a pipeline", old, new)


def check_attempt(old: str, new: str) -> None:
    _check(ATTEMPT_TRANSITIONS, "an attempt", old, new)
