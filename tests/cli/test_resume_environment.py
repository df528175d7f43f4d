"""A resume with a changed job file, and SeaTunnel's --encrypt/--decrypt, fill the file in from the environment of
the command, as submit and check do (config/job_environment.py): the coordinator never reads its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sqlalchemy import select, update

from seatide import intents
from seatide.store import schema as s
from seatide.store.address import default_store_url
from seatide.store.db import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = ("env { job.mode = BATCH, job.name = ${NAME} }\n"
       "source { FakeSource { schema = { fields { id = bigint } }, plugin_output = t } }\n"
       "sink { Console { plugin_input = t } }\n")
CHANGED = JOB.replace("job.name = ${NAME}", "job.name = ${NAME}, parallelism = ${PAR}")   # its sources as before


def _run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, **env})


def _failed_job(tmp_path) -> str:
    """A job submitted with -i NAME=n1 and failed; the store's address."""
    data_dir = str(tmp_path / "data")
    os.makedirs(data_dir)
    store = open_store(default_store_url(data_dir))
    intents.submit(store, data_dir, text=JOB, variables={"NAME": "n1"}, job_id="j", actor="test")
    with store.write() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.job_id == "j").values(status="FAILED", finished_at=1.0))
    store.dispose()
    return default_store_url(data_dir)


def _recorded_variables(url: str) -> dict[str, str]:
    store = open_store(url)
    try:
        with store.read() as conn:
            return json.loads(conn.execute(select(s.jobs.c.variables).where(s.jobs.c.job_id == "j")).scalar_one())
    finally:
        store.dispose()


def test_resume_with_a_changed_file_and_no_i_takes_what_the_file_needs_from_the_environment(tmp_path):
    """``${PAR}``, new in the file, was refused as undefined: without -i the job's own variables were sent and
    nothing of the environment. The job's own win over the environment, as -i ones do at submit."""
    url = _failed_job(tmp_path)
    conf = tmp_path / "changed.conf"
    conf.write_text(CHANGED)
    resumed = _run("seatide.cli.main", "resume", "j", "--config", str(conf), "--store", url,
                   env={"PAR": "2", "NAME": "from-env"})
    assert resumed.returncode == 0, resumed.stderr
    assert _recorded_variables(url) == {"NAME": "n1", "PAR": "2"}


def test_seatunnels_restore_with_a_changed_file_takes_the_environment_too(tmp_path):
    url = _failed_job(tmp_path)
    conf = tmp_path / "changed.conf"
    conf.write_text(CHANGED)
    resumed = _run("seatide.cli.seatunnel", "-r", "j", "-c", str(conf), "-m", "cluster", "--store", url, "--async",
                   env={"PAR": "3"})
    assert resumed.returncode == 0, resumed.stderr
    assert _recorded_variables(url) == {"NAME": "n1", "PAR": "3"}


def test_encrypt_and_decrypt_fill_the_file_in_from_the_environment(tmp_path):
    """As --check and a submit do: ``${NAME}`` from the environment was refused as undefined."""
    conf = tmp_path / "job.conf"
    conf.write_text(JOB.replace("sink { Console { plugin_input = t } }", 'sink { Console { plugin_input = t, '
                                'password = "pw" } }').replace("job.mode = BATCH", 'job.mode = BATCH, '
                                'shade.identifier = base64'))
    for flag in ("--encrypt", "--decrypt"):
        shown = _run("seatide.cli.seatunnel", flag, "-c", str(conf), env={"NAME": "v 1"})
        if flag == "--decrypt":     # clear text is not Base64: refused for its password, not for ${NAME}
            assert "NAME" not in shown.stderr, shown.stderr
            continue
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["env"]["job"]["name"] == "v 1"
