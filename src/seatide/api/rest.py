"""REST API under /api/v1, served by every coordinator (leader or not).

Reads come from the store; writes record desired state (submit, stop) that the leader
acts on. Endpoint names follow SeaTunnel's REST API v2 where they fit.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from seatide.config.loader import ConfigError, load_job_text
from seatide.plan.dag import build_plan
from seatide.store.db import Store
from seatide.store.jobs import BadJobId, JobNotFound, JobRefused, request_stop, submit_job
from seatide.store.states import JOB_TERMINAL
from seatide.store.restore import resume_job
from seatide.store.views import checkpoint_report, job_info, job_rows, overview


class SubmitJob(BaseModel):
    config: str = Field(description="the job file's text (HOCON or JSON)")
    jobId: str | None = None
    jobName: str | None = None
    variables: dict[str, str] = Field(default_factory=dict, description="values for ${name} in the config")
    source: str | None = Field(default=None, description="the job file's name, for messages")
    strict: bool = Field(default=False, description="refuse unknown keys instead of warning about them")


class ResumeJob(BaseModel):
    fromSavepoint: int | None = Field(default=None, description="a savepoint id (default: latest checkpoints)")
    fallback: str | None = Field(default=None, description="fail (default) or fresh")
    config: str | None = Field(default=None, description="a changed job file (default: the job's own)")
    variables: dict[str, str] | None = None
    source: str | None = Field(default=None, description="the changed job file's name, for messages")
    strict: bool = Field(default=False, description="refuse unknown keys instead of warning about them")


class StopJob(BaseModel):
    jobId: str
    isStopWithSavePoint: bool = False


def create_app(store: Store, data_dir: str, node_id: str, cleanup_delay_s: float | None = None) -> FastAPI:
    app = FastAPI(title="SeaTide", version="1", docs_url="/api/v1/docs", openapi_url="/api/v1/openapi.json")

    @app.exception_handler(JobRefused)
    async def refused(_request, exc: JobRefused):
        code = 404 if isinstance(exc, JobNotFound) else 400 if isinstance(exc, BadJobId) else 409
        return JSONResponse(status_code=code, content={"error": str(exc)})

    @app.get("/api/v1/overview")
    def get_overview() -> dict[str, Any]:
        with store.read() as conn:
            info = overview(conn)
        info["servedBy"] = node_id
        return info

    @app.post("/api/v1/submit-job")
    def post_submit(body: SubmitJob) -> dict[str, Any]:
        try:
            config = load_job_text(body.config, body.variables, source_name=body.source or "submitted job",
                                   strict=body.strict)
        except ConfigError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        job_id = submit_job(store, text=body.config, variables=body.variables, config=config,
                            plan=build_plan(config), data_dir=data_dir, job_id=body.jobId,
                            name=body.jobName, cleanup_delay_s=cleanup_delay_s, actor=f"api:{node_id}")
        return {"jobId": job_id, "jobName": body.jobName or config.env.name,
                "warnings": [str(w) for w in config.warnings]}

    @app.get("/api/v1/job-info/{job_id}")
    def get_job_info(job_id: str) -> dict[str, Any]:
        with store.read() as conn:
            info = job_info(conn, job_id)
        if info is None:
            raise HTTPException(status_code=404, detail=f"no job with id {job_id}")
        return info

    @app.get("/api/v1/running-jobs")
    def get_running() -> list[dict[str, Any]]:
        with store.read() as conn:
            return job_rows(conn, exclude=set(JOB_TERMINAL))

    @app.get("/api/v1/finished-jobs/{state}")
    def get_finished(state: str) -> list[dict[str, Any]]:
        wanted = set(JOB_TERMINAL) if state.upper() == "ALL" else {state.upper()}
        if not wanted <= JOB_TERMINAL:
            raise HTTPException(status_code=400, detail=f"state must be one of {', '.join(sorted(JOB_TERMINAL))} or all")
        with store.read() as conn:
            return job_rows(conn, statuses=wanted)

    @app.get("/api/v1/jobs/{job_id}/checkpoints")
    def get_checkpoints(job_id: str, limit: int = 100) -> dict[str, Any]:
        with store.read() as conn:
            report = checkpoint_report(conn, job_id, limit)
        if report is None:
            raise HTTPException(status_code=404, detail=f"no job with id {job_id}")
        return report

    @app.post("/api/v1/jobs/{job_id}/resume")
    def post_resume(job_id: str, body: ResumeJob) -> dict[str, Any]:
        text, variables = _job_text(job_id, body)
        try:
            config = load_job_text(text, variables, source_name=body.source or f"job {job_id}",
                                   strict=body.strict)
        except ConfigError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        if body.fallback not in (None, "fail", "fresh"):
            raise HTTPException(status_code=400, detail="fallback must be fail or fresh")
        resume_job(store, job_id, plan=build_plan(config), text=text, variables=variables,
                   savepoint_id=body.fromSavepoint, fallback=body.fallback, actor=f"api:{node_id}")
        return {"jobId": job_id, "warnings": [str(w) for w in config.warnings]}

    def _job_text(job_id: str, body: ResumeJob) -> tuple[str, dict]:
        import json

        from seatide.store.jobs import load_job
        with store.read() as conn:
            job = load_job(conn, job_id)
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        variables = body.variables if body.variables is not None else json.loads(job.variables)
        return (body.config or job.config), variables

    @app.get("/metrics")
    def get_metrics():
        from fastapi.responses import PlainTextResponse

        from seatide.api.metrics import render
        with store.read() as conn:
            return PlainTextResponse(render(conn), media_type="text/plain; version=0.0.4")

    @app.post("/api/v1/stop-job")
    def post_stop(body: StopJob) -> dict[str, Any]:
        request_stop(store, body.jobId, savepoint=body.isStopWithSavePoint, actor=f"api:{node_id}")
        return {"jobId": body.jobId}

    return app
