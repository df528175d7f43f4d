"""Pipelines an earlier attempt ran to the end of their data, ended without Spark.

A driver that dies after its pipeline's last commit and the sources' recorded ends, before the
pipeline's FINISHED (``driver.before_pipeline_end``), left nothing to do but that status. Its next
attempt would start Spark (~9 CPU-s cold), plan the query, find no data and only then end: the
driver ends such pipelines from the store's records first (``store/data_ends.py``), and the
attempt too when none is left to run, before it waits for Spark or starts it.

BATCH only: a stream's data never ends. Only while the job is to run: a cancel or savepoint
request is answered as before.
"""

from __future__ import annotations

import json
import logging

from seatide.store.states import PIPELINE_TERMINAL, Desired, PipelineStatus

log = logging.getLogger("seatide.driver")


def end_pipelines_whose_data_ended(reporter, job_id: str, desired: str) -> bool:
    """End (FINISHED) each pipeline whose data ended in an earlier attempt; True when no pipeline of
    the attempt is left to run."""
    from seatide.config.loader import load_job_text
    from seatide.plan.dag import build_plan
    from seatide.store.data_ends import pipelines_whose_data_ended
    from seatide.store.jobs import job_view

    if desired != Desired.RUN:
        return False
    view = reporter.read(lambda conn: job_view(conn, job_id))
    config = load_job_text(view.job.config, json.loads(view.job.variables), source_name=f"job {job_id}")
    if config.env.streaming:
        return False
    plan = build_plan(config)
    left = [row.pipeline_id for row in view.pipelines if row.status not in PIPELINE_TERMINAL]
    sources = {p: [source.plugin_id for source in plan.pipeline(p).sources] for p in left}
    ended = reporter.read(lambda conn: pipelines_whose_data_ended(conn, job_id, reporter.incarnation, sources))
    for pipeline_id in sorted(ended):
        # ``desired`` was read before the config was loaded and planned: a cancel since then is
        # answered as before, not overtaken by a FINISHED (each write checks it in its transaction)
        if not reporter.pipeline_status(pipeline_id, PipelineStatus.FINISHED, while_desired=Desired.RUN):
            log.info("job %s: stopped while its pipelines' ends were read; answered as a stop", job_id)
            return False
        log.info("pipeline %s: its sources' ends were recorded after its last commit; FINISHED without a query",
                 pipeline_id)
    return len(ended) == len(left)


__all__ = ["end_pipelines_whose_data_ended"]
