"""The attempt's start gate: a sink's save modes that remove data (DROP_DATA, RECREATE_SCHEMA,
CUSTOM_PROCESSING) are carried out when the sink prepares its target at its pipeline's first batch
(``plugin/save_mode_door.py``), and that waits here until the attempt's start has settled: every
query of the attempt started and has its first offsets, or has ended (``pipeline_start`` settles
it). A pipeline refused at its start (a Postgres-CDC source refused at its first offsets: its
slot.name another job's) makes each such preparation refuse instead, naming that pipeline and
why: nothing is removed for a job that is then refused, whichever pipeline started first (outside
review, F1: two pipelines that would both remove data, the second refused at its first offsets
after the first one's first batch had emptied its target; an order of starts cannot help there).

A batch waits here on a thread of Spark's (``foreachBatch`` runs on the driver) while the start
loop, on the driver's own thread, watches the queries: it waits for their first offsets (Spark's
status past "Getting offsets"), never for a batch, so a batch held here holds nothing it waits for.
A stop asked of the held pipeline (a cancel, a savepoint, another pipeline's failure) ends the wait
at the batch's boundary (``StopAtBatchBoundary``): a start that is stopped never settles.
"""

from __future__ import annotations

import logging
import threading

from seatide.plugin.base import PermanentError

log = logging.getLogger(__name__)

_LOOK_EVERY_S = 0.2     # how often a held batch looks whether its pipeline was asked to stop


class StopAtBatchBoundary(Exception):
    """Raised instead of starting a micro-batch once a stop was requested.

    Spark does not commit a batch whose foreachBatch raised, so a resumed job replays it:
    nothing is lost, and the stopped job's output ends on the last committed batch.
    """


class StartRefused(Exception):
    """A target's preparation that would remove data, refused: another pipeline of the attempt
    was refused at its start (one a retry may fix: a permanent refusal raises ``PermanentError``)."""


class StartGate:
    """One per attempt (``pipeline_start.start_pipelines``): open once the start has settled, or
    refusing, once one of the attempt's pipelines was refused at its start."""

    def __init__(self) -> None:
        self._settled = threading.Event()
        self._refused = None        # the pipeline (a ``PipelineRun``) refused at its start, if any

    def settle(self, refused=None) -> None:
        """The start has settled: every query started has its first offsets or has ended, and
        ``refused`` (None: none) was refused at its start."""
        self._refused = refused
        self._settled.set()

    def pass_through(self, run, target: str) -> None:
        """Before ``run``'s sink removes data from ``target`` when it prepares it: returns once the
        start has settled with no pipeline refused; raises to refuse, or to stop at the batch's
        boundary when ``run`` was asked to stop meanwhile."""
        if not self._settled.is_set():
            log.info("pipeline %s: target %s is prepared (its save modes remove data) once every query of the "
                     "attempt has its first offsets", run.pipeline.pipeline_id, target)
        run.held_at_start = True
        try:
            while not self._settled.wait(_LOOK_EVERY_S):
                if run.stop_requested:
                    raise StopAtBatchBoundary(f"pipeline {run.pipeline.pipeline_id} stopped while its start was held")
        finally:
            run.held_at_start = False
        refused = self._refused
        if refused is not None:
            why = f"held at its first batch: {refused_with(refused, run, run)}"
            raise PermanentError(why) if refused.outcome.permanent else StartRefused(why)


def refused_with(refused, run, destroying) -> str:
    """Why ``run`` did not start, or did not prepare its targets: ``refused`` was refused at its start (or
    failed since), and
    ``destroying`` would have removed data (``run`` itself, or another pipeline), for a job that fails
    (or an attempt retried)."""
    pipeline = refused.pipeline.pipeline_id
    # One that ran a batch failed since its start (a sink's write), where a start's refusal comes before one.
    what = ("failed while the job's start was settling" if getattr(refused, "began_batch", False)
            else "was refused at its start")
    remover = ("a sink of this pipeline" if destroying is run
               else f"a sink of pipeline {destroying.pipeline.pipeline_id}")
    then = (f"Fix pipeline {pipeline}, then run the job again" if refused.outcome.permanent
            else "The job retries the attempt on its own, as job.retry.times allows")
    return (f"pipeline {pipeline} of the job {what} ({refused.outcome.error}), and "
            f"{remover} would remove data when it prepares its target: no pipeline of the job removes "
            f"anything, and nothing was removed. {then}")


__all__ = ["StartGate", "StartRefused", "StopAtBatchBoundary", "refused_with"]
