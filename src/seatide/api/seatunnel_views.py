"""Jobs and the cluster in the shapes of SeaTunnel's REST API v2 (``seatunnel_v2``).

Field names and JSON types follow SeaTunnel's documentation (seatunnel-engine/rest-api-v2.md),
which is not always consistent (a job id is a number in one answer and a string in the
next; ``metrics`` is an object in one list and a string in another): a client written
against that page must find each field where, and as, the page shows it. Fields that mean
nothing in SeaTide carry an honest value of the same type; docs/compatibility.md lists them.
"""

from __future__ import annotations

import json
from importlib import metadata

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from seatide.plan.outline import stored_outline
from seatide.store import schema as s
from seatide.store.checkpoint_views import iso
from seatide.store.clock import read_store_now
from seatide.secrets import mask_tree
from seatide.store.event_masking import job_error, job_name, job_secrets
from seatide.store.jobs import job_view
from seatide.store.states import ATTEMPT_LIVE, JOB_TERMINAL, JobStatus
from seatide.store.views import overview as seatide_overview
from seatide.store.views import row_totals

LONG_MAX = 2**63 - 1


def as_long(job_id: str) -> int | str:
    """A job id as SeaTunnel's long where it is one (SeaTide's generated ids are), else as given."""
    if job_id.isdigit() and str(int(job_id)) == job_id and int(job_id) <= LONG_MAX:
        return int(job_id)
    return job_id


def version() -> str:
    try:
        return metadata.version("seatide")
    except metadata.PackageNotFoundError:
        return "unknown"


def overview(conn: Connection, tags: dict[str, str]) -> dict[str, str]:
    """Counts over the cluster; with a tag filter, workers that match it (SeaTide's carry no tags)."""
    cluster = seatide_overview(conn)
    workers = [] if tags else cluster["workers"]
    busy = dict(conn.execute(select(s.attempts.c.worker_id, func.count())
                             .where(s.attempts.c.state.in_(ATTEMPT_LIVE)).group_by(s.attempts.c.worker_id)).all())
    total = sum(w["slots"] for w in workers)
    used = sum(min(busy.get(w["nodeId"], 0), w["slots"]) for w in workers)
    counts = dict(conn.execute(select(s.jobs.c.status, func.count()).group_by(s.jobs.c.status)).all())
    return {
        "projectVersion": version(),
        "gitCommitAbbrev": "unknown",
        "totalSlot": str(total),
        "unassignedSlot": str(total - used),
        "works": str(len(workers)),
        "runningJobs": str(sum(n for status, n in counts.items() if status not in JOB_TERMINAL)),
        "finishedJobs": str(counts.get(JobStatus.FINISHED, 0)),
        "failedJobs": str(counts.get(JobStatus.FAILED, 0)),
        "cancelledJobs": str(counts.get(JobStatus.CANCELED, 0)),
    }


def job_info(conn: Connection, job_id: str, running_job_metrics: bool = False) -> dict | None:
    """``/job-info/:jobId``: running jobs add env, jars and savepoint origin; ended ones the end."""
    view = job_view(conn, job_id)
    if view is None:
        return None
    job = view.job
    env, dag = _env_and_dag(job)
    info = {"jobId": job.job_id, "jobName": job_name(job), "jobStatus": job.status, "createTime": iso(job.created_at),
            "jobDag": dag,
            "metrics": (_running_job_metrics(job, view.pipelines, read_store_now(conn)) if running_job_metrics
                        else _metrics(view.pipelines))}
    if job.status in JOB_TERMINAL:
        info.update(finishedTime=iso(job.finished_at), errorMsg=job_error(job))
    else:
        info.update(envOptions=env, pluginJarsUrls=_jars(env), isStartWithSavePoint=job.restored_from is not None)
    return info


def running_jobs(conn: Connection) -> list[dict]:
    rows = []
    for job, (read, written) in _jobs_with_totals(conn, s.jobs.c.status.notin_(sorted(JOB_TERMINAL))):
        env, dag = _env_and_dag(job)
        rows.append({"jobId": job.job_id, "jobName": job_name(job), "jobStatus": job.status, "envOptions": env,
                     "createTime": iso(job.created_at), "jobDag": dag, "pluginJarsUrls": _jars(env),
                     "isStartWithSavePoint": job.restored_from is not None, "metrics": _counts(read, written)})
    return rows


def finished_jobs(conn: Connection, statuses: set[str]) -> list[dict]:
    rows = []
    for job, (read, written) in _jobs_with_totals(conn, s.jobs.c.status.in_(sorted(statuses))):
        rows.append({"jobId": job.job_id, "jobName": job_name(job), "jobStatus": job.status, "errorMsg": job_error(job),
                     "createTime": iso(job.created_at), "finishTime": iso(job.finished_at),
                     "jobDag": _env_and_dag(job)[1],
                     # The page shows this one metrics field as a string: the object, as JSON text.
                     "metrics": json.dumps(_counts(read, written))})
    return rows


def _jobs_with_totals(conn: Connection, where) -> list[tuple]:
    """The jobs ``where`` selects, oldest first, each with its rows read and written: two
    queries however many jobs (a thousand running jobs once took 35 s here, read one by one)."""
    totals = row_totals(conn, where)
    jobs = conn.execute(select(s.jobs).where(where).order_by(s.jobs.c.created_at)).all()
    return [(job, totals.get((job.job_id, job.incarnation), (0, 0))) for job in jobs]


def _metrics(pipelines) -> dict[str, str]:
    return _counts(sum(p.rows_read for p in pipelines), sum(p.rows_written for p in pipelines))


def _counts(read: int, written: int) -> dict[str, str]:
    return {"sourceReceivedCount": str(read), "sinkWriteCount": str(written)}


def _running_job_metrics(job, pipelines, now: float) -> dict:
    """The deprecated ``/running-job/:jobId``'s metrics: counts and rates; bytes are not measured."""
    read, written = sum(p.rows_read for p in pipelines), sum(p.rows_written for p in pipelines)
    seconds = max((job.finished_at or now) - job.created_at, 1e-3)     # stamps and now: the store's clock
    return {"SourceReceivedCount": str(read), "SourceReceivedQPS": f"{read / seconds:.2f}",
            "SourceReceivedBytes": "0", "SourceReceivedBytesPerSeconds": "0",
            "SinkWriteCount": str(written), "SinkWriteQPS": f"{written / seconds:.2f}",
            "SinkWriteBytes": "0", "SinkWriteBytesPerSeconds": "0",
            **{name: {} for name in ("TableSourceReceivedCount", "TableSourceReceivedBytes",
                                     "TableSourceReceivedBytesPerSeconds", "TableSourceReceivedQPS",
                                     "TableSinkWriteCount", "TableSinkWriteQPS", "TableSinkWriteBytes",
                                     "TableSinkWriteBytesPerSeconds")}}


def _env_and_dag(job) -> tuple[dict, dict]:
    """The env options (dotted keys) and the DAG, from the job's stored outline (plan/outline.py), masked as
    job-info masks the config: a credential-named option's value (``spark.hadoop.fs.s3a.secret.key``), and the
    job's secrets wherever they show (a table path, a job name made of a secret variable). On the way out, so an
    outline stored before this is masked too (review 8, F1)."""
    env, dag = stored_outline(job.config, job.variables, job.outline)
    secrets = job_secrets(job)
    return mask_tree(env, secrets), {"jobId": job.job_id, **mask_tree(dag, secrets)}


def _jars(env: dict) -> list[str]:
    return [j.strip() for j in str(env.get("jars") or "").replace(";", ",").split(",") if j.strip()]
