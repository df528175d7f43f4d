"""The attempt's pipelines started together: every step that may refuse a pipeline runs for all of
them before any query starts, so that no save mode destroys anything for a job that is then refused.

In this order, each step for every pipeline before the next step:

1. ``open``: its checkpoint directory claimed, its frames built, its sinks opened;
2. the checks ahead (``check_sinks_ahead``): every sink's checks; a refusal fails every pipeline;
3. ``prepare``: Spark's checks of its streaming query, the sources' schema changes handed to its sinks;
4. its query started (one at a time: ``start_pipelines``).

A pipeline refused at 1 or 3 fails every other one too when a sink of them would remove data when it
prepares its target (``destroys_ahead``), as the refusal's kind: none of them has begun a batch, so
nothing was removed. Where nothing destroys, the others start; the refused one fails the job (or its
attempt) as ever.

Queries start one at a time, the pipelines whose sinks would remove data last, each once the one
before has its first offsets (``wait_started``): a source refused there (Postgres-CDC on another
consumer's slot.name) fails its query before the next query starts, and the pipelines not started
yet are refused with it when one of them would remove data, as at 1 and 3. What no step before a batch sees is not covered: a source that fails reading
its first batch's rows does so beside the pipelines started before it.

The wait for first offsets is bounded (``SOURCES_UP_WITHIN_S``) only where nothing that starts next
removes data: a pipeline that would (``_destroys``) starts once every query started before it has its
first offsets or has ended, however long that takes (``_await_first_offsets``). A source's first
offsets may wait on what no bound here can know: a Postgres-CDC slot.name's advisory lock, held by
another job while its slot is made behind open write transactions, then refused as that job's (outside
review, finding 3); a held slot, up to slot.active-timeout.ms (3 minutes). Bounding the source's own wait
below ours instead would rest on a margin no loaded host keeps (a query's start alone took over 60 s at
load 10: timeouts.py). A start that never ends is the leader's to judge: a driver that has not started
its pipelines past job.progress-timeout (at least ``STARTUP_JUDGED_AFTER_S``) is hung (reconcile.py).
"""

from __future__ import annotations

import logging
import time

from seatide.store.states import PipelineStatus

log = logging.getLogger(__name__)

# How long a started query's sources are waited for to give their first offsets before the next
# pipeline starts (``wait_started``), where that pipeline would not remove data.
SOURCES_UP_WITHIN_S = 60.0
_SAY_EVERY_S = 30.0     # a start held for a query still opening says so this often
_OPENING = ("Initializing", "Getting offsets")      # Spark's status while a query has no first offsets


def start_pipelines(runs: list, heartbeat) -> list:
    """Open, check, prepare and start ``runs`` (``PipelineRun``s) in that order; the runs started or
    failed (the job canceled while starting: those not started are left out)."""
    for run in runs:
        if heartbeat.desired != "CANCEL":
            run.open()
    check_sinks_ahead(runs)
    for run in runs:
        if heartbeat.desired != "CANCEL" and run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING:
            run.prepare()
    _refuse_with_the_refused(runs)
    started, opening = [], []      # opening: started, without first offsets when wait_started gave up
    runs = _destroying_last(runs)
    for index, run in enumerate(runs):
        if _destroys(run):
            _await_first_offsets(opening, run, heartbeat)
        if heartbeat.desired == "CANCEL":
            # Canceled while starting: a query not started has nothing to stop; the leader
            # ends its pipeline with the job (reconcile.py) once this attempt has ended.
            continue
        _refuse_after_a_failed_start(started, runs[index:])
        # One query's sources start their Python workers at a time: Spark gives a starting
        # Python worker 10 s to connect back, which several at once on a busy host can miss.
        run.start()
        if not wait_started(run):
            opening.append(run)
        started.append(run)
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


def _refuse_with_the_refused(runs) -> bool:
    """When a pipeline was refused at its start and a sink of the others would remove data, fail
    the others as the refusal was (permanent or not), each told why. True: they were."""
    refused = next((run for run in runs if run.outcome.status == PipelineStatus.FAILED), None)
    waiting = [run for run in runs if run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING]
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
        run.refuse(refused_with(refused, run, destroying[0]), refused.outcome.permanent)
    return True


def _destroying_last(runs: list) -> list:
    """``runs`` with the pipelines whose sinks would remove data when they prepare their targets
    started last: a refusal that comes only at a query's first offsets (a Postgres-CDC slot.name
    another consumer holds) then fails before any of them starts, whichever its place in the job."""
    return sorted(runs, key=_destroys)       # stable: the job's order within each group


def _destroys(run) -> bool:
    """Whether a sink of ``run``, about to start, would remove data when it prepares its target."""
    try:
        return run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING and run.sinks.destroys_ahead()
    except Exception:  # noqa: BLE001 - its target's server answered with an error: its own start judges it
        return True


def _await_first_offsets(opening: list, run, heartbeat) -> None:
    """Before ``run``, whose sinks would remove data, starts: until each query in ``opening`` (started, and
    still without first offsets when ``wait_started`` gave up) has its first offsets or has ended, as a
    refusal there must fail the job before any data is removed. Those found past are taken out of
    ``opening`` (for good: a later trigger's "Getting offsets" is no first start). Ends early when the
    job is canceled."""
    began = said = time.monotonic()
    while heartbeat.desired != "CANCEL":
        opening[:] = [waited for waited in opening if _opening(waited.query)]
        if not opening:
            return
        if time.monotonic() - said >= _SAY_EVERY_S:
            said = time.monotonic()
            log.warning("pipeline %s, whose sinks would remove data, waits to start until pipeline %s has its first "
                        "offsets (a refusal there must come before anything is removed): waited %.0f s",
                        run.pipeline.pipeline_id, ", ".join(str(w.pipeline.pipeline_id) for w in opening),
                        time.monotonic() - began)
        time.sleep(0.2)


def _refuse_after_a_failed_start(started: list, rest: list) -> None:
    """When a pipeline already started has failed (its source refused at its first offsets), refuse
    the ones not started yet if a sink of them would remove data (``_refuse_with_the_refused``)."""
    failed = next((run for run in started if run.poll().status == PipelineStatus.FAILED), None)
    waiting = [run for run in rest if run.sinks is not None and run.outcome.status == PipelineStatus.RUNNING]
    if failed is None or not waiting:
        return
    try:
        destroying = next((run for run in waiting if run.sinks.destroys_ahead()), None)
    except Exception as exc:  # noqa: BLE001 - asking opened a target, and its server answered with an error
        for run in waiting:
            run.fail(exc)
        return
    if destroying is not None:
        for run in waiting:
            run.refuse(refused_with(failed, run, destroying), failed.outcome.permanent)


def refused_with(refused, run, destroying) -> str:
    """Why ``run`` did not start: ``refused`` was refused at its start, and ``destroying`` would have
    removed data (``run`` itself, or another pipeline), for a job that fails (or an attempt retried)."""
    pipeline = refused.pipeline.pipeline_id
    remover = ("a sink of this pipeline" if destroying is run
               else f"a sink of pipeline {destroying.pipeline.pipeline_id}")
    then = (f"Fix pipeline {pipeline}, then run the job again" if refused.outcome.permanent
            else "The job retries the attempt on its own, as job.retry.times allows")
    return (f"not started: pipeline {pipeline} of the job was refused at its start ({refused.outcome.error}), and "
            f"{remover} would remove data when it prepares its target: no pipeline of the job starts, and "
            f"nothing was removed. {then}")


def wait_started(run, timeout_s: float | None = None) -> bool:
    """Until ``run``'s query's sources are up (their Python workers answered, the first offsets
    given), or the query has ended, then note the start; at most ``SOURCES_UP_WITHIN_S``. Whether
    they were (False: the query is still opening, ``_await_first_offsets`` waits on).

    The checkpoint-staleness window opens here: warming up Spark and a Python data
    source is start-up, not a stalled checkpoint.
    """
    query = run.query
    deadline = time.time() + (SOURCES_UP_WITHIN_S if timeout_s is None else timeout_s)
    up = True
    while query is not None and query.isActive:
        if time.time() >= deadline:
            up = False
            break
        message = query.status.get("message", "")
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
