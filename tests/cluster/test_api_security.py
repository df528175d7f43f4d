"""A real coordinator with an API token, and a real job whose secrets must not come out.

On SQLite only: what is tested is the HTTP surface and what drivers write, not the store.
The tests with a job share one coordinator and worker (``shared_cluster``), each reading its
own job's answers, rows and logs; a test with a token starts a coordinator of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest
from sqlalchemy import select

from seatide.store import schema as s
from seatide.testing.cluster import SEATIDE
from tests.security.test_rest_guards import JOB, TOKEN


@pytest.fixture
def store_url(tmp_path):
    return f"sqlite:///{tmp_path}/state.db"


def token_file(tmp_path, content: str = TOKEN, mode: int = 0o600) -> str:
    path = tmp_path / "api-token"
    path.write_text(content + "\n")
    path.chmod(mode)
    return str(path)


def call(method: str, url: str, body: dict | None = None, token: str | None = None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "SEATIDE_API_TOKEN"}
    return subprocess.run([*SEATIDE, *args], capture_output=True, text=True, timeout=120, env={**environ, **(env or {})})


def test_a_coordinator_with_a_token_refuses_mutations_without_it_and_the_cli_sends_it(cluster, tmp_path):
    url = cluster.coordinator(extra=["--api-token-file", token_file(tmp_path)]).url
    submit = url + "/api/v1/submit-job"
    status, body = call("POST", submit, {"config": JOB, "jobId": "no-token"})
    assert status == 401 and "Authorization: Bearer <token>" in body
    assert call("POST", submit, {"config": JOB, "jobId": "wrong"}, token="nope")[0] == 401
    assert call("POST", submit, {"config": JOB, "jobId": "with-token"}, token=TOKEN)[0] == 200
    assert cluster.job("no-token") is None and cluster.job("wrong") is None
    assert call("GET", url + "/api/v1/job-info/with-token")[0] == 200          # reads stay open
    assert call("GET", url + "/metrics")[0] == 200

    conf = tmp_path / "job.conf"
    conf.write_text(JOB)
    sent = cli("submit", str(conf), "--cluster", url, "--job-id", "cli-job", env={"SEATIDE_API_TOKEN": TOKEN})
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "cli-job" and cluster.job("cli-job") is not None
    refused = cli("submit", str(conf), "--cluster", url, "--job-id", "cli-no-token")
    assert refused.returncode == 1
    assert "requires an API token" in refused.stderr and "SEATIDE_API_TOKEN" in refused.stderr
    assert "Traceback" not in refused.stderr and cluster.job("cli-no-token") is None
    by_file = cli("cancel", "cli-job", "--cluster", url, "--api-token-file", token_file(tmp_path))
    assert by_file.returncode == 0, by_file.stderr


def test_auth_reads_closes_reads_too(cluster, tmp_path):
    url = cluster.coordinator(extra=["--api-token-file", token_file(tmp_path), "--auth-reads"]).url
    for path in ("/api/v1/overview", "/api/v1/running-jobs", "/metrics"):
        assert call("GET", url + path)[0] == 401, path
        assert call("GET", url + path, token=TOKEN)[0] == 200, path
    listed = cli("list", "--cluster", url, env={"SEATIDE_API_TOKEN": TOKEN})
    assert listed.returncode == 0, listed.stderr


@pytest.mark.parametrize("content, mode, says", [
    (None, 0o600, "cannot read the API token file"),
    ("", 0o600, "is empty"),
    (TOKEN, 0o604, "readable by every user"),
])
def test_a_coordinator_refuses_to_start_with_an_unusable_token_file(tmp_path, content, mode, says):
    path = token_file(tmp_path, content, mode) if content is not None else str(tmp_path / "missing")
    result = cli("cluster", "coordinator", "--store", f"sqlite:///{tmp_path}/state.db", "--data-dir",
                 str(tmp_path / "data"), "--port", "0", "--api-token-file", path)
    assert result.returncode == 2
    assert says in result.stderr and "Traceback" not in result.stderr


PASSWORD = "S3cret-Jdbc-Pass-9"
TENANT = "ACME-tenant-7731"
SECRET_JOB = """
env { job.mode = BATCH, job.retry.times = 0, secret.variables = [tenant] }
source {
  Jdbc {
    url = "jdbc:postgresql://127.0.0.1:5432/nodb_${tenant}"
    driver = "org.postgresql.Driver"
    user = postgres
    password = "%s"
    query = "select 1 as id"
  }
}
sink { Console {} }
""" % PASSWORD


def test_a_failed_jobs_secrets_appear_in_no_answer_event_status_or_log(shared_cluster):
    cluster = shared_cluster
    url = cluster.any_coordinator().url
    job_id = cluster.submit(SECRET_JOB, "secret-job", variables={"tenant": TENANT})
    cluster.wait_status(job_id, "FAILED", timeout=180)

    seen = {}
    for path in ("/api/v1/overview", "/api/v1/running-jobs", "/api/v1/finished-jobs/all",
                 f"/api/v1/job-info/{job_id}", f"/api/v1/jobs/{job_id}/checkpoints", "/metrics",
                 f"/api/v1/jobs/{job_id}/events", f"/api/v1/jobs/{job_id}/logs"):
        status, body = call("GET", url + path)
        assert status in (200, 404), (path, status)      # events and logs arrive with the web UI
        seen[path] = body
    info = json.loads(seen[f"/api/v1/job-info/{job_id}"])
    # The failure was recorded, and it named the database: masking had something to do.
    assert "nodb_******" in info["errorMsg"], info["errorMsg"]
    assert 'password = "******"' in info["config"]
    with cluster.store.read() as conn:
        seen["jobs"] = repr(conn.execute(select(s.jobs.c.error_msg).where(s.jobs.c.job_id == job_id)).all())
        seen["pipelines"] = repr(conn.execute(select(s.pipelines.c.error).where(s.pipelines.c.job_id == job_id)).all())
        seen["attempts"] = repr(conn.execute(select(s.attempts.c.error).where(s.attempts.c.job_id == job_id)).all())
        seen["events"] = repr(conn.execute(select(s.events.c.detail).where(s.events.c.job_id == job_id)).all())
    for args in (("status", job_id), ("status", job_id, "--json"), ("list",)):
        result = cli(*args, "--cluster", url)
        assert result.returncode == 0, result.stderr
        seen[" ".join(args)] = result.stdout + result.stderr
    assert "nodb_******" in seen[f"status {job_id}"]
    for proc in cluster.procs:
        with open(proc.log_path, errors="replace") as handle:
            seen[proc.name] = handle.read()
    # Every line of the driver's log: SeaTide's (Python logging) and the JVM's (log4j, Spark's
    # task failures that quote the database's answer), written to the process's stdout/stderr
    seen["driver log"] = "".join(_read(path) for path in _driver_logs(cluster.data_dir, job_id))
    assert "ERROR seatide" in seen["driver log"]      # the driver did log its failure
    assert "nodb_******" in seen["driver log"]        # and a line quoted the database's name
    for where, text in seen.items():
        assert PASSWORD not in text and TENANT not in text, f"a secret in {where}: {text[:2000]}"


def _driver_logs(data_dir: str, job_id: str) -> list[str]:
    root = os.path.join(data_dir, "logs", job_id)
    return [os.path.join(folder, f) for folder, _, files in os.walk(root) for f in files]


def _read(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()


PRINTING_JOB = """
env { job.mode = BATCH, secret.variables = [tenant] }
source {
  FakeSource {
    schema = { fields { name = string } }
    rows = [{ kind = INSERT, fields = ["tenant ${tenant} in table orders_${tenant}"] }]
  }
}
sink { Console {} }
"""


def test_what_a_driver_prints_reaches_its_log_masked(shared_cluster):
    """Console's rows go to the driver's stdout, not through Python logging: the worker masks
    the driver's output on its way into the log file."""
    cluster = shared_cluster
    job_id = cluster.submit(PRINTING_JOB, "printing-job", variables={"tenant": TENANT})
    cluster.wait_status(job_id, "FINISHED", timeout=180)
    log = "".join(_read(path) for path in _driver_logs(cluster.data_dir, job_id))
    assert "tenant ****** in table orders_******" in log, log[-3000:]
    assert TENANT not in log


COMMON_WORD_JOB = """
env { job.mode = BATCH, job.retry.times = 0 }
source {
  Jdbc {
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    password = "postgres"
    query = "select * from postgres_cdc_table_%s"
  }
}
sink { Console {} }
"""


def test_a_common_word_password_leaves_names_readable(shared_cluster):
    """SeaTunnel's PostgreSQL jobs use 'postgres' as user and password, and their tables hold
    the word: the server's refusal naming such a table reaches the user as the server wrote
    it, and a job's config keeps its names while its password is masked."""
    from seatide.connectors.jdbc.url import JdbcUrl

    cluster = shared_cluster
    url = cluster.any_coordinator().url
    status, body = call("POST", url + "/api/v1/submit-job", {"config": COMMON_WORD_JOB % "missing", "jobId": "m"})
    assert status == 400 and 'relation \\"postgres_cdc_table_missing\\" does not exist' in body, body
    with JdbcUrl.parse("jdbc:postgresql://127.0.0.1:5432/test?user=postgres").connect(autocommit=True) as conn:
        with conn.cursor() as cursor:
            cursor.execute("drop table if exists postgres_cdc_table_1")
            cursor.execute("create table postgres_cdc_table_1 (id int primary key, note text)")
            cursor.execute("insert into postgres_cdc_table_1 values (1, 'in postgres_cdc_table_1')")
    job_id = cluster.submit(COMMON_WORD_JOB % "1", "common-word")
    cluster.wait_status(job_id, "FINISHED", timeout=180)
    info = json.loads(call("GET", url + f"/api/v1/job-info/{job_id}")[1])
    assert 'password = "******"' in info["config"] and 'user = "postgres"' in info["config"]
    assert "from postgres_cdc_table_1" in info["config"]
    log = "".join(_read(path) for path in _driver_logs(cluster.data_dir, job_id))
    assert "in postgres_cdc_table_1" in log and "******_cdc" not in log      # Console's row, as read
