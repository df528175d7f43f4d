"""SeaTunnel's REST API v2, served at the root of every coordinator's port.

Paths, query parameters, bodies and answers follow SeaTunnel's documentation
(seatunnel-engine/rest-api-v2.md), so scripts written for SeaTunnel work unchanged.
Writes are intents (``seatide.intents``), as for SeaTide's own API under /api/v1; reads
are shaped by ``seatunnel_views``. A refusal is SeaTunnel's ``{"status": "fail",
"message": ...}`` with a 4xx status; what SeaTide cannot honour is a 404 saying so (never a 5xx: a 5xx means SeaTide broke).

Job ids: SeaTunnel's are numbers (long), SeaTide's are names. SeaTide's generated ids are
numeric, so where the page shows a number (``submit-job``, ``stop-job``) a numeric id is
a JSON number; any other id stays a string. A request may give an id either way.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any, Callable

from fastapi import APIRouter, Body, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy import select

from seatide import intents
from seatide.api import seatunnel_views as views
from seatide.api.encoding import ListResponse
from seatide.api.limits import HTTP_STATUS, BodyRoute
from seatide.api.seatunnel_monitoring import system_monitoring
from seatide.config.shade import ShadeError, encrypt_config
from seatide.intents import Refusal, RefusalKind
from seatide.store import schema as s
from seatide.store.db import Store
from seatide.store.job_ids import BadJobId, check_job_id
from seatide.store.paths import driver_log_path
from seatide.store.states import JOB_TERMINAL

FINISHED_STATES = frozenset(JOB_TERMINAL | {"UNKNOWABLE"})   # SeaTide never loses track: UNKNOWABLE is empty
_LOG_NAME = re.compile(r"^job-(?P<job>.+)-attempt-(?P<attempt>\d+)\.log$")


def fail(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"status": "fail", "message": message})


class SeaTunnelRoute(BodyRoute):
    """Every refusal of these routes in SeaTunnel's error shape, never a traceback."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def answer(request: Request):
            try:
                return await handler(request)
            except Refusal as exc:
                return fail(HTTP_STATUS[exc.kind], str(exc))
            except ShadeError as exc:
                return fail(400, str(exc))
            except RequestValidationError as exc:
                return fail(400, "; ".join(_problem(e) for e in exc.errors()))
        return answer


def _problem(error: dict) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
    return f"{where}: {error.get('msg', 'invalid')}"


class StopJob(BaseModel):
    jobId: int | str
    isStopWithSavePoint: bool = False


def seatunnel_router(store: Store, data_dir: str, node_id: str, cleanup_delay_s: float | None = None) -> APIRouter:
    router = APIRouter(route_class=SeaTunnelRoute, tags=["SeaTunnel REST API v2"])
    actor = f"seatunnel-api:{node_id}"

    def submitted(config: dict, job_id: str | None, job_name: str | None, from_savepoint: str | None):
        """A submission, or a resume with isStartWithSavePoint=true: what was accepted, and what its
        answer adds to SeaTunnel's jobId and jobName: a resume's warnings when it has any (a decision
        an earlier incarnation owed, carried on or re-planned: store/owed_moves.py)."""
        if not isinstance(config, dict):
            raise Refusal(RefusalKind.BAD_REQUEST, "the job config must be a JSON object with env, source, "
                                                   "transform and sink")
        text = json.dumps(config)
        if _flag(from_savepoint, "isStartWithSavePoint"):
            if not job_id:
                raise Refusal(RefusalKind.BAD_REQUEST, "isStartWithSavePoint=true needs the jobId of the job "
                                                       "to start from its savepoint")
            # The job's latest checkpoints: after a stop with savepoint they are that savepoint.
            accepted = intents.resume(store, job_id, text=text, source="request body", actor=actor)
            warnings = {"warnings": accepted.warnings} if accepted.warnings else {}
        else:
            accepted = intents.submit(store, data_dir, text=text, source="request body", job_id=job_id,
                                      name=job_name, actor=actor, cleanup_delay_s=cleanup_delay_s)
            warnings = {}      # SeaTunnel's answer, as before
        return accepted, warnings

    def stopped(body: StopJob) -> dict[str, Any]:
        job_id = str(body.jobId)
        intents.stop(store, job_id, savepoint=body.isStopWithSavePoint, actor=actor)
        return {"jobId": views.as_long(job_id)}

    @router.get("/overview")
    def get_overview(request: Request) -> dict[str, str]:
        with store.read() as conn:
            return views.overview(conn, dict(request.query_params))

    @router.get("/running-jobs", response_model=list[dict])
    def get_running_jobs() -> ListResponse:
        with store.read() as conn:
            return ListResponse(views.running_jobs(conn))

    @router.get("/job-info/{job_id}")
    def get_job_info(job_id: str):
        return _job_info(job_id, running_job_metrics=False)

    @router.get("/running-job/{job_id}", deprecated=True)
    def get_running_job(job_id: str):
        return _job_info(job_id, running_job_metrics=True)

    def _job_info(job_id: str, running_job_metrics: bool):
        with store.read() as conn:
            info = views.job_info(conn, job_id, running_job_metrics)
        # SeaTunnel's answer for a job it cannot find is {"jobId": ...}; the 404 says the same.
        return info if info is not None else JSONResponse(status_code=404, content={"jobId": job_id})

    @router.get("/finished-jobs", response_model=list[dict])
    @router.get("/finished-jobs/{state}", response_model=list[dict])
    def get_finished_jobs(state: str | None = None) -> ListResponse:
        wanted = FINISHED_STATES if state is None else {state.upper()}
        if not wanted <= FINISHED_STATES:
            raise Refusal(RefusalKind.BAD_REQUEST, f"state must be one of {', '.join(sorted(FINISHED_STATES))}")
        with store.read() as conn:
            return ListResponse(views.finished_jobs(conn, set(wanted)))

    @router.get("/system-monitoring-information")
    def get_system_monitoring() -> list[dict[str, str]]:
        return system_monitoring()

    @router.post("/submit-job")
    def post_submit_job(config: dict = Body(...), jobId: str | None = None, jobName: str | None = None,
                        isStartWithSavePoint: str | None = None) -> dict[str, Any]:
        accepted, warnings = submitted(config, jobId, jobName, isStartWithSavePoint)
        return {"jobId": views.as_long(accepted.job_id), "jobName": accepted.job_name, **warnings}

    @router.post("/submit-jobs")
    def post_submit_jobs(configs: list[dict] = Body(...)) -> list[dict[str, Any]]:
        # One by one, like SeaTunnel: a refusal names the job it stopped at; earlier ones stay submitted.
        answers = []
        for config in configs:
            config = dict(config)
            params = config.pop("params", None) or {}
            if not isinstance(params, dict):
                raise Refusal(RefusalKind.BAD_REQUEST, "params must be an object: {\"jobId\": ..., \"jobName\": ...}")
            accepted, warnings = submitted(config, _text(params.get("jobId")), _text(params.get("jobName")),
                                           _text(params.get("isStartWithSavePoint")))
            answers.append({"jobId": accepted.job_id, "jobName": accepted.job_name, **warnings})
        return answers

    @router.post("/stop-job")
    def post_stop_job(body: StopJob) -> dict[str, Any]:
        return stopped(body)

    @router.post("/stop-jobs")
    def post_stop_jobs(bodies: list[StopJob]) -> list[dict[str, Any]]:
        return [stopped(body) for body in bodies]

    @router.post("/encrypt-config")
    def post_encrypt_config(config: dict = Body(...)) -> dict[str, Any]:
        return encrypt_config(config)

    @router.post("/update-tags")
    def post_update_tags():
        return fail(404, "SeaTide does not serve /update-tags: its workers carry no tags, and work is placed "
                         "by free slots (seatide cluster worker --slots)")

    @router.post("/submit-job/upload")
    def post_submit_job_upload():
        return fail(404, "SeaTide does not serve /submit-job/upload: send the config as the JSON body of "
                         "POST /submit-job, or its file text to POST /api/v1/submit-job")

    @router.get("/logs")
    @router.get("/log")
    def get_logs(request: Request, format: str = "html"):
        return _log_list(request, None, format)

    @router.get("/logs/{name}")
    @router.get("/log/{name}")
    def get_log(request: Request, name: str, format: str = "html"):
        if name.endswith(".log"):
            return _log_text(name)
        return _log_list(request, name, format)

    def _log_list(request: Request, job_id: str | None, fmt: str):
        if fmt not in ("html", "json"):
            raise Refusal(RefusalKind.BAD_REQUEST, f"format must be html or json, not {fmt!r}")
        with store.read() as conn:
            query = select(s.attempts.c.job_id, s.attempts.c.attempt_id, s.attempts.c.worker_id)
            if job_id is not None:
                query = query.where(s.attempts.c.job_id == job_id)
            attempts = conn.execute(query.order_by(s.attempts.c.attempt_id)).all()
        base = str(request.base_url).rstrip("/")
        logs = [{"node": a.worker_id or node_id, "logLink": f"{base}/logs/{_log_name(a)}", "logName": _log_name(a)}
                for a in attempts if os.path.isfile(_log_path(a.job_id, a.attempt_id))]
        if fmt == "json":
            return logs
        items = "".join(f'<li><a href="{html.escape(entry["logLink"])}">{html.escape(entry["logName"])}</a> '
                        f'({html.escape(entry["node"])})</li>' for entry in logs)
        return HTMLResponse(f"<html><body><h1>Driver logs</h1><ul>{items}</ul></body></html>")

    def _log_text(name: str):
        match = _LOG_NAME.match(name)
        if match is None:
            raise Refusal(RefusalKind.BAD_REQUEST, f"{name!r} is not a log name: job-<jobId>-attempt-<n>.log")
        try:
            path = _log_path(check_job_id(match["job"]), int(match["attempt"]))
        except BadJobId as exc:
            raise Refusal(RefusalKind.BAD_REQUEST, str(exc)) from None
        if not os.path.isfile(path):
            raise Refusal(RefusalKind.NOT_FOUND, f"no log {name}")
        with open(path, encoding="utf-8", errors="replace") as handle:
            return PlainTextResponse(handle.read())

    def _log_path(job_id: str, attempt_id: int) -> str:
        return driver_log_path(data_dir, job_id, attempt_id)

    return router


def _log_name(attempt) -> str:
    return f"job-{attempt.job_id}-attempt-{attempt.attempt_id}.log"


def _flag(value: str | None, name: str) -> bool:
    if value is None or value.lower() in ("", "false"):
        return False
    if value.lower() == "true":
        return True
    raise Refusal(RefusalKind.BAD_REQUEST, f"{name} must be true or false, not {value!r}")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
