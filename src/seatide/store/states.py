"""The state machines of jobs, pipelines and attempts: one table each, checked on every write.

A write that is not in its table is a bug, not a condition to handle: ``check_*`` raises
``IllegalTransition``. Terminal states have no way out; a resume is a new incarnation.
"""

from __future__ import annotations


class IllegalTransition(AssertionError):
    pass


# -- jobs (SeaTunnel's names) ----------------------------------------------------------
JOB_TERMINAL = frozenset({"FAILED", "CANCELED", "FINISHED", "SAVEPOINT_DONE"})
JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    "CREATED": frozenset({"PENDING", "CANCELED"}),
    "PENDING": frozenset({"SCHEDULED", "CANCELING", "CANCELED", "FAILED", "DOING_SAVEPOINT"}),
    "SCHEDULED": frozenset({"RUNNING", "FAILING", "CANCELING", "DOING_SAVEPOINT"} | JOB_TERMINAL),
    "RUNNING": frozenset({"FAILING", "CANCELING", "DOING_SAVEPOINT"} | JOB_TERMINAL),
    "FAILING": frozenset({"PENDING", "FAILED", "CANCELING", "CANCELED", "DOING_SAVEPOINT"}),
    "DOING_SAVEPOINT": frozenset({"FAILING", "CANCELING"} | JOB_TERMINAL),
    "CANCELING": frozenset({"CANCELED", "FAILED", "FINISHED"}),
    **{state: frozenset() for state in JOB_TERMINAL},
}
JOB_ACTIVE = frozenset({"SCHEDULED", "RUNNING", "DOING_SAVEPOINT", "CANCELING"})

# -- desired state, written by users (any process), acted on by the leader ---------------
DESIRED = ("RUN", "CANCEL", "SAVEPOINT")

# -- pipelines -------------------------------------------------------------------------
# SAVEPOINT_DONE: stopped after a committed batch on request; a resume restarts it.
PIPELINE_TERMINAL = frozenset({"FINISHED", "FAILED", "CANCELED", "SAVEPOINT_DONE"})
PIPELINE_TRANSITIONS: dict[str, frozenset[str]] = {
    "CREATED": frozenset({"RUNNING"} | PIPELINE_TERMINAL),
    "RUNNING": frozenset({"CREATED"} | PIPELINE_TERMINAL),   # CREATED: its attempt was lost
    **{state: frozenset() for state in PIPELINE_TERMINAL},
}

# -- attempts --------------------------------------------------------------------------
ATTEMPT_LIVE = frozenset({"ASSIGNED", "LAUNCHING", "RUNNING"})
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    "ASSIGNED": frozenset({"LAUNCHING", "LOST", "FAILED"}),
    "LAUNCHING": frozenset({"RUNNING", "SUCCEEDED", "FAILED", "LOST"}),
    "RUNNING": frozenset({"SUCCEEDED", "FAILED", "LOST"}),
    "SUCCEEDED": frozenset(),
    "FAILED": frozenset(),
    "LOST": frozenset(),
}


def final_job_status(pipeline_statuses: list[str], savepoint_requested: bool) -> str:
    """A job's end from its pipelines: FAILED > CANCELED > SAVEPOINT_DONE > FINISHED."""
    if "FAILED" in pipeline_statuses:
        return "FAILED"
    if "CANCELED" in pipeline_statuses:
        return "CANCELED"
    if savepoint_requested:
        return "SAVEPOINT_DONE"
    return "FINISHED"


def _check(table: dict[str, frozenset[str]], what: str, old: str, new: str) -> None:
    if new not in table.get(old, frozenset()):
        raise IllegalTransition(f"{what} cannot go from {old} to {new}")


def check_job(old: str, new: str) -> None:
    _check(JOB_TRANSITIONS, "a job", old, new)


def check_pipeline(old: str, new: str) -> None:
    _check(PIPELINE_TRANSITIONS, "a pipeline", old, new)


def check_attempt(old: str, new: str) -> None:
    _check(ATTEMPT_TRANSITIONS, "an attempt", old, new)
