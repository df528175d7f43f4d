"""A coordinator of the SeaTide from before recorded environments, served in a process of its own (a test's).

Run: ``python older_coordinator.py STORE_URL DATA_DIR PORT [current]`` (``current``: this version's app, as is). It is this version's REST app as that one was: no
``POST /api/v1/jobs``, no ``POST /api/v1/jobs/{id}/incarnations``, and ``/submit-job`` and ``/jobs/{id}/resume``
as its intents did them (the pre-change tree's ``intents.submit``, ``intents.resume``): the request's
``environment`` ignored, the variables recorded as given (a resume's new variables in place of the row's, the
mark and its entries with them), unmarked, and the job's config parsed with this process's environment. Every
process then reads the job's ``${NAME}``s from its own environment. It registers no presence row (as
``old_server.py`` of the review did not): what it writes is what matters here.
"""

from __future__ import annotations

import json
import sys

import uvicorn
from fastapi import Body

from seatide.api.rest import create_app
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store.db import open_store
from seatide.store.jobs import load_job, submit_job
from seatide.store.restore import resume_job

NEWER_ROUTES = {"/api/v1/jobs", "/api/v1/jobs/{job_id}/incarnations", "/api/v1/submit-job",
                "/api/v1/jobs/{job_id}/resume"}


def older_app(store, data_dir: str):
    app = create_app(store, data_dir, "older")
    app.router.routes[:] = [route for route in app.router.routes
                            if not (getattr(route, "path", "") in NEWER_ROUTES and "POST" in route.methods)]

    @app.post("/api/v1/submit-job")
    def older_submit(body: dict = Body(...)):
        variables = body.get("variables") or {}
        config = load_job_text(body["config"], variables, source_name="submitted job", runs_here=False)
        job_id = submit_job(store, text=body["config"], variables=variables, config=config, plan=build_plan(config),
                            outline=outline_json(config), data_dir=data_dir, job_id=body.get("jobId"),
                            name=body.get("jobName") or config.env.name, actor="api:older")
        return {"jobId": job_id, "jobName": config.env.name, "warnings": []}

    @app.post("/api/v1/jobs/{job_id}/resume")
    def older_resume(job_id: str, body: dict = Body(...)):
        with store.read() as conn:
            job = load_job(conn, job_id)
        variables = body["variables"] if body.get("variables") is not None else json.loads(job.variables)
        text = body.get("config") or job.config
        config = load_job_text(text, variables, source_name=f"job {job_id}", runs_here=False)
        resume_job(store, job_id, plan=build_plan(config), text=text, variables=variables,
                   savepoint_id=body.get("fromSavepoint"), fallback=body.get("fallback"), actor="api:older")
        return {"jobId": job_id, "warnings": []}

    return app


if __name__ == "__main__":
    url, data_dir, port, *current = sys.argv[1:]
    store = open_store(url)
    app = create_app(store, data_dir, "current") if current else older_app(store, data_dir)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
