"""A coordinator of the SeaTide from before recorded environments, served in a process of its own (a test's).

Run: ``python older_coordinator.py STORE_URL DATA_DIR PORT [current]`` (``current``: this version's app, as is). It is this version's REST app as that one was: no
``POST /api/v1/jobs``, no ``POST /api/v1/jobs/{id}/incarnations``, and ``/submit-job`` and ``/jobs/{id}/resume``
as its intents did them (the pre-change tree's ``intents.submit``, ``intents.resume``): the request's
``environment`` ignored, the variables recorded as given (a resume's new variables in place of the row's, the
mark and its entries with them), unmarked, and the job's config parsed with this process's environment. Every
process then reads the job's ``${NAME}``s from its own environment. It registers no presence row (as
``old_server.py`` of the review did not): what it writes is what matters here.

``lease`` (in place of ``current``): a coordinator of a SeaTide from before revision 0022 too, on a store at 0021:
its revisions cut back to 0021 (it opens that store as it is, and would refuse a newer one), and its lease code,
this package's naming the old table (tests/store/older_lease.py). It competes for the lease when asked, so a test
says when: ``POST /older/lease`` ticks it (elect or renew) and answers what it holds and what failed;
``POST /older/write`` tries a fenced leader write (``Store.leader_tx``) with the epoch given.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import uvicorn
from fastapi import Body

from seatide.api.rest import create_app
from seatide.config.loader import load_job_text
from seatide.plan.dag import build_plan
from seatide.plan.outline import outline_json
from seatide.store.db import open_store
from seatide.store.events import record_event
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


def as_before_0022(data_dir: str) -> None:
    """This process as a SeaTide from before revision 0022: its revisions and the table of its lease."""
    from seatide.coordinator import lease
    from seatide.store import migrations, schema
    from tests.store.older_lease import LEADER_LEASE, OLDER_LEADER_LOCK

    scripts = os.path.join(data_dir, "older-scripts")
    shutil.copytree(migrations.SCRIPTS, scripts, ignore=lambda _dir, names: [
        n for n in names if n == "__pycache__" or (n[:4].isdigit() and n[:4] > "0021")])
    migrations.SCRIPTS, migrations.HEAD = scripts, "0021"
    # What tests/store/older_lease.py's before_0022 does, for the process's life: the older table and lock name, no
    # rule for a lease copied at the move.
    schema.leadership, lease.copied_at_the_move, lease.LEADER = LEADER_LEASE, lambda row: False, OLDER_LEADER_LOCK


def with_lease(app, store, node_id: str = "older-c"):
    """``app`` with the older coordinator's lease, ticked when a test asks (``POST /older/lease``)."""
    from seatide.coordinator.lease import LeaderLease
    from seatide.store.liveness import liveness_for
    from seatide.timeouts import Timeouts

    lease = LeaderLease(store, node_id, None, Timeouts(), liveness_for(store, Timeouts()))
    failed: list[str] = []
    catch = logging.Handler()
    catch.emit = lambda record: failed.append(record.getMessage())
    logging.getLogger("seatide.coordinator.lease").addHandler(catch)

    @app.post("/older/lease")
    def tick():
        failed.clear()
        leading = lease.tick()
        return {"leader": leading, "epoch": lease.epoch, "losses": [loss.why for loss in lease.losses],
                "failed": list(failed)}

    @app.post("/older/write")
    def write(body: dict = Body(...)):
        try:
            with store.leader_tx(body["epoch"]) as conn:
                record_event(conn, "OLDER_LEADER_WROTE", f"coordinator:{node_id}", epoch=body["epoch"])
        except Exception as exc:         # what a leader write of that version meets: said, not raised
            return {"wrote": False, "error": str(exc)}
        return {"wrote": True}

    return app


if __name__ == "__main__":
    url, data_dir, port, *mode = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if mode == ["lease"]:
        as_before_0022(data_dir)
    store = open_store(url)
    if mode == ["current"]:
        app = create_app(store, data_dir, "current")
    else:
        app = older_app(store, data_dir)
    if mode == ["lease"]:
        app = with_lease(app, store)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
