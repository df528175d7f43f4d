"""A job's error shows no secret in the job lists, as it shows none in job-info.

The review after eed0614: job-info masks the stored error again as it reads it (rows written before drivers
masked, or by a message whose secret no key names), but the rows of GET /api/v1/jobs and its running and
finished lists, SeaTunnel's finished-jobs list and job-info, and ``seatide run``'s summary returned
``jobs.error_msg`` as stored. Both stores.
"""
from __future__ import annotations

from sqlalchemy import update

from seatide.api.seatunnel_views import finished_jobs, job_info as seatunnel_job_info
from seatide.cli.run import job_summary
from seatide.store import schema as s
from seatide.store.views import job_info, job_rows
from tests.conftest import store_url  # noqa: F401  (a fixture)
from tests.store.test_store import store, submit  # noqa: F401  (a fixture)

PASSWORD = "Listed-Pw-4417"
JOB = f"""
env {{ job.mode = "STREAMING" }}
source {{ Postgres-CDC {{ base-url = "jdbc:postgresql://127.0.0.1:5432/test", username = "postgres",
  password = "{PASSWORD}", table-names = ["test.public.items"] }} }}
sink {{ Console {{}} }}
"""
ERROR = f"FATAL: could not connect as postgres with {PASSWORD}; tried psql -h db --password {PASSWORD}"


def test_every_list_shows_a_jobs_stored_error_masked(store, tmp_path):
    submit(store, tmp_path, "j1", text=JOB)
    submit(store, tmp_path, "j2")          # no secret, no error: listed as it is
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j1").values(status="FAILED", error_msg=ERROR))
    with store.read() as conn:
        shown = {
            "job-info": job_info(conn, "j1")["errorMsg"],
            "jobs": [row["errorMsg"] for row in job_rows(conn) if row["jobId"] == "j1"][0],
            "finished": [row["errorMsg"] for row in job_rows(conn, statuses={"FAILED"})][0],
            "seatunnel finished": [row["errorMsg"] for row in finished_jobs(conn, {"FAILED"})][0],
            "seatunnel job-info": seatunnel_job_info(conn, "j1")["errorMsg"],
        }
        assert [row["errorMsg"] for row in job_rows(conn) if row["jobId"] == "j2"] == [None]
    shown["seatide run"] = job_summary(store, "j1")["error"]
    for view, error in shown.items():
        assert PASSWORD not in error and error.startswith("FATAL: could not connect as postgres"), (view, error)
