"""Reads for operators (and the web UI): a job's event log, its driver log, its plan, and
the cluster's nodes.

Like the rest of /api/v1 they answer from the store (and, for driver logs, the shared data
directory), so every coordinator, leader or not, answers the same. Paths are built only
from checked job ids and integer attempt ids (``seatide.store.paths``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Query

from seatide import intents
from seatide.api.driver_log import MAX_READ_BYTES, read_page, read_tail
from seatide.config.job import ConfigError
from seatide.intents import Refusal, RefusalKind
from seatide.plan.dag import build_plan
from seatide.secrets import mask_message, mask_tree, secret_values
from seatide.store.db import Store
from seatide.store.event_masking import job_name
from seatide.store.job_ids import BadJobId, check_job_id
from seatide.store.jobs import load_job
from seatide.api.limits import MAX_ID
from seatide.store.paths import driver_log_path
from seatide.store.views import job_events, log_attempt, nodes_report

DEFAULT_TAIL_LINES = 200
# Ids and offsets beyond what the store (64-bit integers) holds are refused (422), as in rest.py.


def inspection_router(store: Store, data_dir: str) -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.get("/jobs/{job_id}/events")
    def get_events(job_id: str, after: int = Query(0, ge=0, le=MAX_ID, description="return events after this seq"),
                   limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
        """The job's event log, oldest first; page on with ``after`` = the last ``seq`` seen."""
        with store.read() as conn:
            events = job_events(conn, _checked(job_id), after, limit)
        if events is None:
            raise Refusal(RefusalKind.NOT_FOUND, f"no job with id {job_id}")
        return {"jobId": job_id, "events": events, "nextAfter": events[-1]["seq"] if events else after,
                "more": len(events) == limit}

    @router.get("/jobs/{job_id}/logs")
    def get_logs(job_id: str,
                 attempt: int | None = Query(None, ge=1, le=MAX_ID, description="an attempt id (default: current or last)"),
                 tail: int | None = Query(None, ge=1, le=100_000, description="the last N lines"),
                 offset: int | None = Query(None, ge=0, le=MAX_ID, description="a byte offset to read from"),
                 limit: int = Query(65536, ge=1, le=MAX_READ_BYTES, description="bytes to read from offset"),
                 ) -> dict[str, Any]:
        """The driver log of one attempt: its last ``tail`` lines (default 200), or the bytes
        from ``offset`` (follow a log by passing back ``nextOffset``)."""
        if tail is not None and offset is not None:
            raise Refusal(RefusalKind.BAD_REQUEST, "give either tail (lines from the end) or offset (bytes "
                                                   "from the start), not both")
        _checked(job_id)
        with store.read() as conn:
            row = log_attempt(conn, job_id, attempt)
        if row is None:
            raise Refusal(RefusalKind.NOT_FOUND, f"job {job_id} has no attempt {attempt}" if attempt is not None
                          else f"job {job_id} has no attempt yet, so no driver log")
        path = driver_log_path(data_dir, job_id, row.attempt_id)
        try:
            page = read_page(path, offset, limit) if offset is not None else read_tail(
                path, tail or DEFAULT_TAIL_LINES)
        except FileNotFoundError:
            raise Refusal(RefusalKind.NOT_FOUND, (
                f"no driver log for attempt {row.attempt_id} of job {job_id} in this coordinator's data "
                f"directory (logs/{job_id}/attempt-{row.attempt_id}.log); worker {row.worker_id} writes it "
                "in its own, which is readable here only when the data directory is shared")) from None
        except OSError as exc:
            raise Refusal(RefusalKind.NOT_FOUND, f"the driver log of attempt {row.attempt_id} of job {job_id} "
                                                 f"cannot be read here: {exc.strerror}") from None
        return {"jobId": job_id, "attemptId": row.attempt_id, "worker": row.worker_id, "attemptState": row.state,
                "offset": page.offset, "nextOffset": page.next_offset, "size": page.size,
                "truncated": page.truncated, "text": page.text}

    @router.get("/jobs/{job_id}/plan")
    def get_plan(job_id: str) -> dict[str, Any]:
        """The job's DAG grouped by pipeline (its config, masked, is in job-info)."""
        with store.read() as conn:
            job = load_job(conn, _checked(job_id))
        if job is None:
            raise Refusal(RefusalKind.NOT_FOUND, f"no job with id {job_id}")
        pipelines, error = _plan_shape(job.job_id, job.config, job.variables)
        return {"jobId": job.job_id, "jobName": job_name(job), "incarnation": job.incarnation, "mode": job.mode,
                "pipelines": pipelines, "error": error}

    @router.get("/nodes")
    def get_nodes() -> dict[str, Any]:
        """Coordinators and workers with their heartbeats; the leader and its epoch."""
        with store.read() as conn:
            return nodes_report(conn)

    return router


def _checked(job_id: str) -> str:
    try:
        return check_job_id(job_id)
    except BadJobId as exc:
        raise Refusal(RefusalKind.BAD_REQUEST, str(exc)) from None


@lru_cache(maxsize=128)
def _plan_shape(job_id: str, text: str, variables: str) -> tuple[list[dict], str | None]:
    """Plugins by pipeline, each with its inputs; cached because a config never changes
    within an incarnation and loading one may reach a database (a Jdbc catalog)."""
    secrets = secret_values(text, json.loads(variables))
    try:
        plan = build_plan(intents.stored(text, json.loads(variables), source=f"job {job_id}"))
    except Exception as exc:  # noqa: BLE001 - a plan that cannot be drawn (a plugin changed since submission?) is reported, never a 500
        why = str(exc) if isinstance(exc, (Refusal, ConfigError)) else f"job {job_id}: the plan cannot be drawn: {exc}"
        return [], mask_message(why, secrets)
    # An output named after a secret variable (``plugin_output = "rows_${tenant}"``) is masked as the DAG's is.
    return mask_tree([{"pipelineId": p.pipeline_id,
                       "plugins": [{"id": spec.plugin_id, "kind": spec.kind, "name": spec.name, "line": spec.line,
                                    "output": spec.output, "inputs": p.inputs.get(spec.plugin_id, [])}
                                   for spec in p.plugins]}
                      for p in plan.pipelines], secrets), None
