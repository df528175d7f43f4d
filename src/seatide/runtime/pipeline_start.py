"""The attempt's pipelines started together: every step that may refuse a pipeline runs for all of
them before any query starts, so that no save mode destroys anything for a job that is then refused.

In this order, each step for every pipeline before the next step:

1. ``open``: its checkpoint directory claimed, its frames built, its sinks opened;
2. the checks ahead (``check_sinks_ahead``): every sink's checks; a refusal fails every pipeline;
3. ``prepare``: Spark's checks of its streaming query, the sources' schema changes handed to its sinks;
4. its query started (one at a time: ``start_pipelines``), then the start settled (``_settle``).

A pipeline refused at 1 or 3 fails every other one too when a sink of them would remove data when it
prepares its target (``destroys_ahead``), as the refusal's kind: none of them has begun a batch, so
nothing was removed. Where nothing destroys, the others start; the refused one fails the job (or its
attempt) as ever.

A source may be refused only at its query's first offsets (Postgres-CDC on another consumer's
slot.name, or on one another job made while this one waited for the name's advisory lock), after
other queries started. A sink's save modes that remove data are carried out at its pipeline's first
batch, and that waits at the attempt's start gate (``runtime/start_gate.py``) until every query
started has its first offsets or has ended: a pipeline refused by then makes it refuse instead,
naming the refusal, so nothing is removed for a job that is then refused, whichever the order of
its pipelines (outside review, F1). Queries still start one at a time, the pipelines that would remove
data last (``_destroying_last``): one refused quickly keeps those from starting at all.

Every wait here ends once the job is wanted other than running (a cancel, a savepoint: the queries
not started yet still start one at a time, each given until its sources leave Spark's "Initializing",
so that the savepoint covers every pipeline), and ``wait_started`` gives a query's sources
``SOURCES_UP_WITHIN_S`` before the next query starts. Where something would remove data, the start
settles for as long as the job runs: no bound of the driver's own fails a job that the user's settings
let run (a Postgres-CDC source may make its slot behind a long transaction, and refuses by its own
``slot.active-timeout.ms``). What ends a start that never settles is the user's policy, applied by the
leader to any pipeline without checkpoints or progress (checkpoint.on-stale, job.on-hung); meanwhile
the driver writes what each pipeline waits for to its row (``pipelines.waiting``), which job-info and
those verdicts show (outside review, F3/F4). What no step before a batch sees is not covered: a source
that fails reading its first batch's rows does so once the start has settled.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from seatide.runtime.start_gate import StartGate, refused_with
from seatide.store.states import PipelineStatus

log = logging.getLogger(__name__)

# How long a started query's sources are waited for to give their first offsets before the next
# pipeline starts (``wait_started``).
SOURCES_UP_WITHIN_S = 60.0
_SAY_EVERY_S = 30.0     # a start held for a query still opening says so this often
_OPENING = ("Initializing", "Getting offsets")      # Spark's status while a query has no first offsets
_INITIALIZING = "Initializing"      # ... while its sources are made (a Python source's worker connecting back)
_RUNNING = "RUN"        # the job's desired state while it is to run (Heartbeat.desired)


def start_pipelines(runs: list, heartbeat) -> list:
    """Open, check, prepare and start ``runs`` (``PipelineRun``s) in that order, then settle the start
    (``_settle``); the runs started or failed (the job canceled while starting: those not started are
    left out)."""
    gate = StartGate()
    for run in runs:
        run.start_gate = partial(gate.pass_through, run)
        if heartbeat.desired != "CANCEL":
            run.open()
    check_sinks_ahead(runs)
    for run in runs:
        if heartbeat.desired != "CANCEL" and run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING:
            run.prepare()
    _refuse_with_the_refused(runs)
    started = []
    # Asked once per run (each asks its sinks' logs): the order, the settling and its notes agree.
    removers = [run for run in runs if _destroys(run)]
    runs = _destroying_last(runs, removers)
    for index, run in enumerate(runs):
        if heartbeat.desired == "CANCEL":
            # Canceled while starting: a query not started has nothing to stop; the leader
            # ends its pipeline with the job (reconcile.py) once this attempt has ended.
            continue
        for earlier in started:
            earlier.poll()      # a source refused at its first offsets has failed its query
        _refuse_with_the_refused(started, runs[index:])
        # One query's sources start their Python workers at a time: Spark gives a starting
        # Python worker 10 s to connect back, which several at once on a busy host can miss.
        run.start()
        wait_started(run, heartbeat=heartbeat)
        started.append(run)
    if not removers:
        gate.settle()      # nothing waits there
    elif heartbeat.desired == _RUNNING:
        # Stopped meanwhile: never settled; a pipeline held there ends at its stop (``StartGate``).
        _settle(gate, started, heartbeat, removers)
    return started


def check_sinks_ahead(runs) -> None:
    """Every sink of the pipelines about to start, checked ahead together (``SinkRun.check_ahead``) before
    any of them prepares a target: checked per sink, one sink's DROP_DATA emptied its table and then
    another sink of the job was refused (a privilege, a missing column, a save mode that refuses: an
    ERROR_WHEN_DATA_EXISTS target holding rows, a table RECREATE_SCHEMA could not create). A refusal ends every one of
    these pipelines as it ends the sink's own: none has begun a batch. So does a pipeline refused at its
    ``open`` (a claimed checkpoint directory, a plan that does not build) when another destroys ahead:
    the job fails, and nothing was removed for it (outside review, F3)."""
    if _refuse_with_the_refused(runs):
        return
    opened = [run for run in runs if run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING]
    try:
        destroys = any(run.sinks.destroys_ahead() for run in opened)
        for run in opened:
            run.sinks.check_ahead(run.checked_frames(), destroys)
    except Exception as exc:  # noqa: BLE001 - a refusal, or the server's error while asking: judged by fail
        for run in opened:
            run.fail(exc)


def _refuse_with_the_refused(runs, waiting_in=None) -> bool:
    """When one of ``runs`` has failed (refused at its start, or since it started) and a sink of the
    pipelines waiting to start (those of ``waiting_in``, by default of ``runs``, not ended) would remove
    data, fail the waiting ones as it failed (permanent or not), each told why. True: they were."""
    refused = next((run for run in runs if run.outcome.status == PipelineStatus.FAILED), None)
    waiting = [run for run in (runs if waiting_in is None else waiting_in)
               if run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING]
    if refused is None or not waiting:
        return False
    try:
        destroying = [run for run in waiting if run.sinks.destroys_ahead()]
    except Exception as exc:  # noqa: BLE001 - asking opened a target, and its server answered with an error
        for run in waiting:
            run.fail(exc)
        return True
    if not destroying:
        return False
    for run in waiting:
        run.refuse(f"not started: {refused_with(refused, run, destroying[0])}", refused.outcome.permanent)
    return True


def _destroying_last(runs: list, removers: list) -> list:
    """``runs`` with the pipelines whose sinks would remove data when they prepare their targets
    started last: a refusal that comes only at a query's first offsets (a Postgres-CDC slot.name
    another consumer holds) then fails before any of them starts, whichever its place in the job."""
    return sorted(runs, key=lambda run: run in removers)       # stable: the job's order within each group


def _destroys(run) -> bool:
    """Whether a sink of ``run``, about to start, would remove data when it prepares its target."""
    try:
        return run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING and run.sinks.destroys_ahead()
    except Exception:  # noqa: BLE001 - its target's server answered with an error: its own start judges it
        return True


def _settle(gate: StartGate, started: list, heartbeat, removers: list | None = None) -> None:
    """Until each query in ``started`` has its first offsets or has ended, then open ``gate``, or make it
    refuse when one of them has failed (``StartGate.settle``); ends, leaving it unsettled, once the job is
    wanted other than running. No bound of its own: the user's settings judge a start that does not settle
    (the module's doc); meanwhile each pipeline's row says what it waits for (``_waits``)."""
    began, said, told = time.monotonic(), 0.0, {}
    removers = ([run for run in started if _destroys(run)] if removers is None else
                [run for run in removers if run in started and run.outcome.status == PipelineStatus.RUNNING])
    try:
        while heartbeat.desired == _RUNNING:
            # Opening first, then the outcomes: a query seen past its opening was so before the poll, so
            # one refused in between is seen failed; the other way round, it was neither (review 3, F1).
            queries = [run.query for run in started]
            opening = [run for run in started if _opening(run.query)]
            failed = next((run for run in started if run.poll().status == PipelineStatus.FAILED), None)
            if failed is None and any(run.query is not query for run, query in zip(started, queries)):
                time.sleep(0.2)     # a poll started a query again (a schema change): look at the new one (review 4, F3)
                continue
            if failed is not None or not opening:
                gate.settle(failed)
                return
            _tell(started, _waits(removers, opening), told)
            if time.monotonic() - said >= _SAY_EVERY_S:
                said = time.monotonic()
                log.warning("the job's sinks that would remove data prepare their targets once every pipeline has "
                            "its first offsets (a refusal there must come before anything is removed), %.0f s on: %s",
                            said - began, "; ".join(told[run.pipeline.pipeline_id] for run in opening))
            time.sleep(0.2)
    finally:
        _tell(started, {}, told)


def _waits(removers: list, opening: list) -> dict:
    """pipeline id -> what its start waits for: the ones ``opening`` for their first offsets, the others of
    ``removers`` (a sink of them would remove data) for them."""
    waits = {run.pipeline.pipeline_id: f"starting: pipeline {run.pipeline.pipeline_id} waits for its first offsets "
                                       f"(sources {', '.join(source.name for source in run.pipeline.sources)}; "
                                       f"Spark: '{run.query.status.get('message', '')}')" for run in opening}
    ids = ", ".join(str(run.pipeline.pipeline_id) for run in opening)
    for run in removers:
        if run.pipeline.pipeline_id not in waits:
            waits[run.pipeline.pipeline_id] = (f"starting: a sink of pipeline {run.pipeline.pipeline_id} would remove "
                                               f"data, and prepares its target once pipeline {ids} has its first "
                                               f"offsets")
    return waits


def _tell(started: list, waits: dict, told: dict) -> None:
    """Write each pipeline's wait (``waits``; none: cleared) where it changed from ``told``, which it updates."""
    for run in started:
        what = waits.get(run.pipeline.pipeline_id)
        if told.get(run.pipeline.pipeline_id) != what:
            run.reporter.mark_pipeline(run.pipeline.pipeline_id, waiting=what)
            told[run.pipeline.pipeline_id] = what


def wait_started(run, timeout_s: float | None = None, heartbeat=None) -> bool:
    """Until ``run``'s query's sources are up (their Python workers answered, the first offsets
    given), or the query has ended, then note the start; at most ``SOURCES_UP_WITHIN_S``; once
    ``heartbeat``'s job is to stop, only while its sources are made (a savepoint: the next query's
    Python workers must not start beside these, outside review F5), or not at all (a cancel).
    Whether they were (False: the query is still opening; ``_settle`` waits on where a sink would
    remove data).

    The checkpoint-staleness window opens here: warming up Spark and a Python data
    source is start-up, not a stalled checkpoint.
    """
    query = run.query
    deadline = time.time() + (SOURCES_UP_WITHIN_S if timeout_s is None else timeout_s)
    up = True
    while query is not None and query.isActive:
        message = query.status.get("message", "")
        desired = _RUNNING if heartbeat is None else heartbeat.desired
        # A savepoint still lets the query's sources be made before the next query starts (a Python worker
        # connecting back), but waits for no first offsets; a cancel starts nothing more.
        stopping = desired == "CANCEL" or (desired != _RUNNING and not message.startswith(_INITIALIZING))
        if time.time() >= deadline or stopping:
            up = False
            break
        if message.startswith("Terminated"):
            # Failing: Spark says so before it stops the sources and ends the query, and a query
            # still active looks healthy to ``poll``: wait (bounded) until it has ended.
            _await_end(query, deadline)
            up = not query.isActive
            break
        if query.recentProgress or not message.startswith(_OPENING):
            break
        time.sleep(0.1)
    if query is not None and run.outcome.status == PipelineStatus.RUNNING:
        run.reporter.pipeline_status(run.pipeline.pipeline_id, PipelineStatus.RUNNING)
    return up


def _opening(query) -> bool:
    """Whether ``query`` has no first offsets yet, or is failing and has not ended (``wait_started``)."""
    if query is None or not query.isActive:
        return False
    message = query.status.get("message", "")
    return message.startswith("Terminated") or (not query.recentProgress and message.startswith(_OPENING))


def _await_end(query, deadline: float) -> None:
    try:
        query.awaitTermination(max(0.1, min(10.0, deadline - time.time())))
    except Exception:  # noqa: BLE001 - the query's own failure: ``poll`` reads it from the query
        pass


__all__ = ["check_sinks_ahead", "refused_with", "start_pipelines", "wait_started"]
