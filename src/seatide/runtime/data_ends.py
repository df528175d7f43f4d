"""Pipelines an earlier attempt ran to the end of their data, ended without Spark.

A driver that dies after its pipeline's last commit and the sources' recorded ends, before the
pipeline's FINISHED (``driver.before_pipeline_end``), left nothing to do but that status. Its next
attempt would start Spark (~9 CPU-s cold), plan the query, find no data and only then end: the
driver ends such pipelines from the store's records first (``store/data_ends.py``), and the
attempt too when none is left to run, before it waits for Spark or starts it.

BATCH only: a stream's data never ends. Only while the job is to run: a cancel or savepoint
request is answered as before.

The worker launches an attempt its driver will end so without its early Spark start (no warm
driver spent, no JVM forked beside the decision): by the same test (``ends_without_spark``), so
a hinted attempt never starts its JVM late, after the decision.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from seatide.store.states import PIPELINE_TERMINAL, Desired, PipelineStatus

log = logging.getLogger("seatide.driver")


def _data_ended(read: Callable, job_id: str, incarnation: int) -> tuple[list[int], set[int]] | None:
    """(the attempt's pipelines left to run, those of them whose data ended); None for a job not
    to run or a stream. ``read(query)``: ``query(conn)`` in a read of the store."""
    from seatide.config.loader import load_job_env, load_job_outline
    from seatide.plan.dag import outline_pipelines
    from seatide.store.data_ends import pipelines_whose_data_ended
    from seatide.store.jobs import job_view

    view = read(lambda conn: job_view(conn, job_id))
    if view.job.desired != Desired.RUN:
        return None
    text, variables, name = view.job.config, json.loads(view.job.variables), f"job {job_id}"
    if load_job_env(text, variables).streaming:
        return None
    # The plan's pipelines without their plugins built: no connector (nor pyspark) is imported in
    # the worker for its hint, and no option checked again (the job was validated when recorded).
    pipelines = {p.pipeline_id: p for p in outline_pipelines(load_job_outline(text, variables, source_name=name)[1])}
    left = [row.pipeline_id for row in view.pipelines if row.status not in PIPELINE_TERMINAL]
    sources = {p: [source.plugin_id for source in pipelines[p].sources] for p in left}
    return left, read(lambda conn: pipelines_whose_data_ended(conn, job_id, incarnation, sources))


def end_pipelines_whose_data_ended(reporter, job_id: str, desired: str) -> bool:
    """End (FINISHED) each pipeline whose data ended in an earlier attempt; True when no pipeline of
    the attempt is left to run."""
    if desired != Desired.RUN:
        return False
    found = _data_ended(reporter.read, job_id, reporter.incarnation)
    if found is None:
        return False
    left, ended = found
    for pipeline_id in sorted(ended):
        # ``desired`` was read before the config was loaded and planned: a cancel since then is
        # answered as before, not overtaken by a FINISHED (each write checks it in its transaction)
        if not reporter.pipeline_status(pipeline_id, PipelineStatus.FINISHED, while_desired=Desired.RUN):
            log.info("job %s: stopped while its pipelines' ends were read; answered as a stop", job_id)
            return False
        log.info("pipeline %s: its sources' ends were recorded after its last commit; FINISHED without a query",
                 pipeline_id)
    return len(ended) == len(left)


def ends_without_spark(store, job_id: str, incarnation: int) -> bool:
    """A worker's hint, before it launches an attempt: its driver will end it without Spark (the
    driver's own test, above), so it needs no early Spark start."""
    from seatide.store.data_ends import may_have_ended

    with store.read() as conn:
        if not may_have_ended(conn, job_id, incarnation):
            return False

    def read(query):
        with store.read() as conn:
            return query(conn)
    try:
        found = _data_ended(read, job_id, incarnation)
    except Exception as exc:      # a config its driver will report: the hint is only worth a JVM
        log.info("job %s: no hint (%s)", job_id, exc)
        return False
    return found is not None and bool(found[0]) and len(found[1]) == len(found[0])


__all__ = ["end_pipelines_whose_data_ended", "ends_without_spark"]
