"""A job submitted to a real coordinator process is never filled in from the coordinator's own environment.

``env { job.name = ${AWS_SECRET_ACCESS_KEY} }`` submitted over REST took the coordinator's AWS secret as the
job's name, shown in /api/v1/jobs, /metrics' labels and SeaTunnel's views. The submitter's variables fill it
in, and the CLI sends what the file takes from its own environment (config/job_environment.py), masked where
the variable's name is a credential's.
"""

from __future__ import annotations

import json

from tests.cluster.test_api_security import call, cli
from tests.stores import sqlite_only

COORDINATOR_SECRET, COORDINATOR_TABLE = "wJalrXUtnFEMI-coordinator-K7MDENG", "coordinator_table_7731"
CLIENT_SECRET = "Zq81-client Secret.x"      # the CLI sends it as it is, filled in as the same -i value is
REST_SECRET = "Zq81-rest-Secret"      # a variable's value is filled in as written (quoted by whoever needs it)
JOB = """
env { job.mode = BATCH, job.name = ${AWS_SECRET_ACCESS_KEY} }
source { FakeSource { schema { fields { id = bigint } }, plugin_output = ${RESULT_TABLE} } }
sink { Console { plugin_input = ${RESULT_TABLE} } }
"""
VIEWS = ("/api/v1/jobs", "/api/v1/running-jobs", "/api/v1/overview", "/metrics", "/running-jobs",
         "/api/v1/job-info/from-cli", "/api/v1/jobs/from-cli/plan", "/job-info/from-cli", "/api/v1/job-info/from-rest")


@sqlite_only
def test_a_submitted_job_takes_the_submitters_variables_never_the_coordinators_environment(cluster, tmp_path):
    coordinator = cluster.coordinator(env={"AWS_SECRET_ACCESS_KEY": COORDINATOR_SECRET,
                                           "RESULT_TABLE": COORDINATOR_TABLE})
    url = coordinator.url
    status, body = call("POST", url + "/api/v1/submit-job", {"config": JOB, "jobId": "no-variables"})
    assert status == 400, body
    # (its placeholder masked as a credential-named pair's value is: "-i AWS_SECRET_ACCESS_KEY=******")
    assert "${AWS_SECRET_ACCESS_KEY} is not defined: pass -i AWS_SECRET_ACCESS_KEY=" in body
    assert '\\"variables\\" in a REST submit' in body and cluster.job("no-variables") is None

    given = {"AWS_SECRET_ACCESS_KEY": REST_SECRET, "RESULT_TABLE": "rest_table"}
    status, body = call("POST", url + "/api/v1/submit-job", {"config": JOB, "jobId": "from-rest", "variables": given})
    assert status == 200 and json.loads(body)["jobName"] == "******", body

    conf = tmp_path / "job.conf"
    conf.write_text(JOB)
    sent = cli("submit", str(conf), "--cluster", url, "--job-id", "from-cli",
               env={"AWS_SECRET_ACCESS_KEY": CLIENT_SECRET, "RESULT_TABLE": "cli_table"})
    assert sent.returncode == 0, sent.stderr
    assert json.loads(cluster.job("from-cli").variables) == {"AWS_SECRET_ACCESS_KEY": CLIENT_SECRET,
                                                             "RESULT_TABLE": "cli_table"}
    assert cluster.job("from-cli").name == "******"
    missing = cli("submit", str(conf), "--cluster", url, "--job-id", "cli-without")
    assert missing.returncode == 2 and "${AWS_SECRET_ACCESS_KEY} is not defined" in missing.stderr
    assert "Traceback" not in missing.stderr and cluster.job("cli-without") is None

    seen = {path: call("GET", url + path) for path in VIEWS}
    assert all(status == 200 for status, _ in seen.values()), {p: s for p, (s, _) in seen.items()}
    assert "cli_table" in seen["/api/v1/jobs/from-cli/plan"][1]      # the client's value, not the coordinator's
    seen = {path: body for path, (_, body) in seen.items()}
    with open(coordinator.log_path, errors="replace") as handle:
        seen["coordinator log"] = handle.read()
    for where, text in seen.items():
        for secret in (COORDINATOR_SECRET, COORDINATOR_TABLE, REST_SECRET, CLIENT_SECRET):
            assert secret not in text, f"{secret!r} in {where}: {text[:2000]}"
