"""REST API under /api/v1, served by every coordinator (leader or not).

Reads come from the store; writes are intents (``seatide.intents``) that record desired
state for the leader to act on. Endpoint names follow SeaTunnel's REST API v2 where
they fit.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from seatide import failpoints, intents
from seatide.api.auth import TokenAuth
from seatide.api.encoding import ListResponse
from seatide.api.inspection import inspection_router
from seatide.api.limits import DEFAULT_MAX_REQUEST_BYTES, HTTP_STATUS, MAX_ID, BodyRoute, BodySizeLimit
from seatide.api.metrics import CoordinatorMetrics, RequestTimer, ResponseStatus
from seatide.api.seatunnel_v2 import seatunnel_router
from seatide.api.sessions import ReadAgainOnNewSession
from seatide.config.shade import ShadeError, encrypt_config
from seatide.intents import Refusal, RefusalKind
from seatide.store.db import Store
from seatide.store.states import JOB_TERMINAL
from seatide.store.checkpoint_views import checkpoint_report
from seatide.store.views import job_info, job_rows, overview
from seatide.ui import mount_ui

# Ids and counts the store holds in 64-bit integers: larger ones are refused (422), not overflowed.


# The coordinator never lends its own environment to a job (config/job_environment.py): a client gives the values
# a ${NAME} falls back to, as the seatide CLI does with what it captured from its shell. A client sets only values
# it knows; none given is an empty environment.
ENVIRONMENT_DOC = ("values for the ${NAME}s the config falls back to the environment for, from the submitter's "
                   "environment (the seatide CLI sends what it captured); none: an empty environment")


class SubmitJob(BaseModel):
    config: str = Field(description="the job file's text (HOCON or JSON)")
    jobId: str | None = None
    jobName: str | None = None
    variables: dict[str, str] = Field(default_factory=dict, description="values for ${name} in the config")
    environment: dict[str, str] | None = Field(default=None, description=ENVIRONMENT_DOC)
    source: str | None = Field(default=None, description="the job file's name, for messages")
    strict: bool = Field(default=False, description="refuse unknown keys instead of warning about them")


class ResumeJob(BaseModel):
    fromSavepoint: int | None = Field(default=None, ge=1, le=MAX_ID,
                                      description="a savepoint id (default: latest checkpoints)")
    fallback: str | None = Field(default=None, description="fail (default) or fresh")
    config: str | None = Field(default=None, description="a changed job file (default: the job's own)")
    variables: dict[str, str] | None = None
    environment: dict[str, str] | None = Field(default=None, description=ENVIRONMENT_DOC + " (with a changed config; "
                                                                          "default: the job's recorded one)")
    source: str | None = Field(default=None, description="the changed job file's name, for messages")
    strict: bool = Field(default=False, description="refuse unknown keys instead of warning about them")


class StopJob(BaseModel):
    jobId: str
    isStopWithSavePoint: bool = False
    release: bool = Field(default=False, description=(
        "cancel and release: once the job has ended, drop what its sources hold (a Postgres-CDC replication "
        "slot); the job can then only be resumed fresh. Also for a job already CANCELED or FAILED"))


class DismissLeft(BaseModel):
    holds: str = Field(description="the slot a release of the job left, dropped by hand (or its server gone for good): "
                                   "shown no more, with a RELEASE_LEFT_DISMISSED event")


class WakeOnWrite:
    """ASGI middleware: after a request that changed something (a submit, stop, resume, ...),
    call ``wake`` so this process's coordinator reconciles now, not at its next tick. Only
    an accelerator: the tick finds every change anyway."""

    def __init__(self, app, wake: Callable[[], None]):
        self.app = app
        self.wake = wake

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        status = ResponseStatus(send)
        await self.app(scope, receive, status)
        if status.code < 400:
            self.wake()


def create_app(store: Store, data_dir: str, node_id: str, cleanup_delay_s: float | None = None,
               metrics: CoordinatorMetrics | None = None, *, api_token: str | None = None,
               auth_reads: bool = False, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
               on_write: Callable[[], None] | None = None) -> FastAPI:
    app = FastAPI(title="SeaTide", version="1", docs_url="/api/v1/docs", openapi_url="/api/v1/openapi.json")
    app.router.route_class = BodyRoute
    app.state.metrics = metrics = metrics or CoordinatorMetrics(store, node_id)
    app.add_middleware(ReadAgainOnNewSession)      # innermost: a read taken again is timed as one
    if on_write is not None:
        app.add_middleware(WakeOnWrite, wake=on_write)
    app.add_middleware(RequestTimer, histogram=metrics.api_request)
    app.add_middleware(BodySizeLimit, max_bytes=max_request_bytes)
    if api_token:    # added last, so it runs first: an unauthorised body is never read
        app.add_middleware(TokenAuth, token=api_token, auth_reads=auth_reads)

    @app.exception_handler(Refusal)
    async def refused(_request, exc: Refusal):
        return JSONResponse(status_code=HTTP_STATUS[exc.kind], content={"error": str(exc)})

    @app.exception_handler(RequestValidationError)
    async def malformed(_request, exc: RequestValidationError):
        # FastAPI's default answer echoes the whole input back, a job config's passwords included.
        return JSONResponse(status_code=422, content={"error": "invalid request: " + validation_message(exc)})

    def submitted(body: SubmitJob) -> dict[str, Any]:
        accepted = intents.submit(store, data_dir, text=body.config, variables=body.variables, source=body.source,
                                  job_id=body.jobId, name=body.jobName, strict=body.strict,
                                  actor=f"api:{node_id}", cleanup_delay_s=cleanup_delay_s,
                                  environment=body.environment)
        return {"jobId": accepted.job_id, "jobName": accepted.job_name, "warnings": accepted.warnings}

    def stopped(body: StopJob) -> dict[str, Any]:
        accepted = intents.stop(store, body.jobId, savepoint=body.isStopWithSavePoint, release=body.release,
                                actor=f"api:{node_id}")
        return {"jobId": body.jobId, **({"release": "REQUESTED", "jobStatus": accepted.status} if body.release else {})}

    @app.get("/api/v1/overview")
    def get_overview() -> dict[str, Any]:
        with store.read() as conn:
            info = overview(conn)
        info["servedBy"] = node_id
        return info

    # POST /jobs and POST /jobs/{id}/incarnations do what /submit-job and /jobs/{id}/resume do. The CLI uses only
    # these: a coordinator from before recorded environments lacks them (405, 404), so it is never sent a job whose
    # ${NAME}s it would fill from its own environment (cli/client.py, docs/rest-api.md).
    @app.post("/api/v1/submit-job")
    @app.post("/api/v1/jobs")
    def post_submit(body: SubmitJob) -> dict[str, Any]:
        return submitted(body)

    @app.post("/api/v1/submit-jobs")
    def post_submit_many(bodies: list[SubmitJob]) -> list[dict[str, Any]]:
        # One by one, like SeaTunnel: a refusal names the job it stopped at; earlier ones stay submitted.
        return [submitted(body) for body in bodies]

    @app.get("/api/v1/job-info/{job_id}")
    def get_job_info(job_id: str) -> dict[str, Any]:
        with store.read() as conn:
            info = job_info(conn, job_id)
        if info is None:
            raise HTTPException(status_code=404, detail=f"no job with id {job_id}")
        return info

    # The lists skip FastAPI's validation and encoding of a return value (api/encoding.py).
    @app.get("/api/v1/running-jobs", response_model=list[dict[str, Any]])
    def get_running() -> ListResponse:
        failpoints.hit("api.job_list", scope="running")    # tests: one list fails while the other answers
        with store.read() as conn:
            return ListResponse(job_rows(conn, exclude=set(JOB_TERMINAL)))

    @app.get("/api/v1/finished-jobs/{state}", response_model=list[dict[str, Any]])
    def get_finished(state: str) -> ListResponse:
        wanted = set(JOB_TERMINAL) if state.upper() == "ALL" else {state.upper()}
        if not wanted <= JOB_TERMINAL:
            raise HTTPException(status_code=400, detail=f"state must be one of {', '.join(sorted(JOB_TERMINAL))} or all")
        failpoints.hit("api.job_list", scope="finished")
        with store.read() as conn:
            return ListResponse(job_rows(conn, statuses=wanted))

    @app.get("/api/v1/jobs", response_model=list[dict[str, Any]])
    def get_jobs() -> ListResponse:
        # Every job, each once, from one read: the two lists above, read one after the other, miss a job
        # resumed between them (seatide list, review 7 F2).
        failpoints.hit("api.job_list", scope="all")
        with store.snapshot() as conn:     # one moment on PostgreSQL too: a job's pipelines of its incarnation
            return ListResponse(job_rows(conn))

    @app.get("/api/v1/jobs/{job_id}/checkpoints")
    def get_checkpoints(job_id: str, limit: int = Query(100, ge=1, le=10_000)) -> dict[str, Any]:
        with store.read() as conn:
            report = checkpoint_report(conn, job_id, limit)
        if report is None:
            raise HTTPException(status_code=404, detail=f"no job with id {job_id}")
        return report

    @app.post("/api/v1/jobs/{job_id}/resume")
    @app.post("/api/v1/jobs/{job_id}/incarnations")
    def post_resume(job_id: str, body: ResumeJob) -> dict[str, Any]:
        accepted = intents.resume(store, job_id, text=body.config, variables=body.variables, source=body.source,
                                  strict=body.strict, savepoint_id=body.fromSavepoint, fallback=body.fallback,
                                  actor=f"api:{node_id}", environment=body.environment)
        return {"jobId": accepted.job_id, "warnings": accepted.warnings}

    @app.post("/api/v1/jobs/{job_id}/left-behind/dismiss")
    def post_dismiss_left(job_id: str, body: DismissLeft) -> dict[str, Any]:
        return {"jobId": job_id, "holds": body.holds,
                "dismissed": intents.dismiss_left(store, job_id, body.holds, actor=f"api:{node_id}")}

    @app.post("/api/v1/jobs/{job_id}/savepoint")
    def post_savepoint(job_id: str) -> dict[str, Any]:
        return stopped(StopJob(jobId=job_id, isStopWithSavePoint=True))

    @app.get("/metrics")
    def get_metrics(request: Request) -> Response:
        body, content_type = metrics.exposition(request.headers.get("accept"))
        return Response(body, media_type=content_type)

    @app.post("/api/v1/encrypt-config")
    def post_encrypt_config(config: dict = Body(...)) -> dict[str, Any]:
        try:
            return encrypt_config(config)
        except ShadeError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None

    @app.post("/api/v1/stop-job")
    def post_stop(body: StopJob) -> dict[str, Any]:
        return stopped(body)

    @app.post("/api/v1/stop-jobs")
    def post_stop_many(bodies: list[StopJob]) -> list[dict[str, Any]]:
        return [stopped(body) for body in bodies]

    app.include_router(seatunnel_router(store, data_dir, node_id, cleanup_delay_s))   # SeaTunnel's API at the root
    app.include_router(inspection_router(store, data_dir))   # events, driver logs, plan, nodes
    mount_ui(app)
    return app


def validation_message(exc: RequestValidationError) -> str:
    """One line per problem, each naming where it is ("body.jobId: ...")."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ()))
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(problems[:10]) or "the request does not match the API"
