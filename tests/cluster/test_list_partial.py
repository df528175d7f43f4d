"""``seatide list`` against coordinators one of whose two job lists fails: the other's jobs are shown.

A cluster answers the running jobs and the finished jobs in two requests. With the second failing after
the first answered, ``list`` printed no job at all (review 6, F1). Real coordinators on SQLite (what is
tested is the CLI over HTTP), each with one list's handler made to fail by a failpoint (``api.job_list``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from seatide.testing.cluster import SEATIDE, Cluster, http
from seatide.testing.jobs import CONSOLE_JOB
from tests.stores import sqlite_only

pytestmark = [pytest.mark.cluster, sqlite_only]

SEATUNNEL = [sys.executable, "-m", "seatide.cli.seatunnel"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120)


def test_list_shows_the_jobs_one_list_answered_names_the_other_and_fails(cluster: Cluster):
    broken = {"finished": cluster.coordinator("c1", env={"SEATIDE_FAILPOINTS": "api.job_list@finished=raise"},
                                              wait=False),
              "running": cluster.coordinator("c2", env={"SEATIDE_FAILPOINTS": "api.job_list@running=raise"},
                                             wait=False)}
    cluster.wait_serving(*broken.values())
    cluster.submit(CONSOLE_JOB, "waiting")        # no worker: it waits, one of the running jobs
    cluster.submit(CONSOLE_JOB, "ended")
    assert http("POST", broken["finished"].url + "/api/v1/stop-job", {"jobId": "ended"})[0] == 200
    cluster.wait_status("ended", "CANCELED", timeout=90)
    for failing, shown in (("finished", "waiting"), ("running", "ended")):
        url = broken[failing].url
        table = _run(*SEATIDE, "list", "--cluster", url)
        assert table.returncode == 1, (failing, table)
        listed = [line.split()[0] for line in table.stdout.splitlines()[1:]]
        assert listed == [shown], (failing, table.stdout)
        assert f"the {failing} jobs are not shown" in table.stderr and "500" in table.stderr, table.stderr
        assert "Traceback" not in table.stderr, table.stderr
        for command in ([*SEATIDE, "list", "--json", "--cluster", url], [*SEATUNNEL, "-l", "-cn", url]):
            answer = _run(*command)     # scripts read stdout: still the array of the jobs read, alone
            assert answer.returncode == 1, (command, answer)
            assert [job["jobId"] for job in json.loads(answer.stdout)] == [shown], (command, answer.stdout)
            assert f"the {failing} jobs are not shown" in answer.stderr and "Traceback" not in answer.stderr
