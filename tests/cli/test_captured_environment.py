"""The seatide commands capture what a job's ``${NAME}`` falls back to from their own environment and send it
with the job (config/job_environment.py): real processes, as a user runs them, against the REST app served on a
real socket in this process (whose own environment has none of these names), or straight at its store.

A captured value reaches the job as given: a ``,``, ``#``, ``"``, ``}``, a backslash, a new line and the text
``${HOME}`` in it are stored intact and are never read again as HOCON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import select

from seatide.config.loader import parse_job_tree
from seatide.store import schema as s
from tests.cli.test_list_race import serving  # noqa: F401  (a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ODD = 'a,#"}\\ b\n${HOME} c'
JOB = """
env {{ job.mode = BATCH, job.name = ${{SEATIDE_TEST_ODD}} }}
source {{ FakeSource {{ row.num = 3, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Console {{{sink}}} }}
"""


def shell(**extra: str) -> dict[str, str]:
    """The submitting shell's environment: this one's, an API token dropped, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in ("SEATIDE_API_TOKEN", "SEATIDE_TEST_ODD")}, **extra}


def cli(*words: str, module: str = "seatide.cli.main", env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *words], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env or shell())


def recorded(store, job_id: str):
    with store.read() as conn:
        return conn.execute(select(s.jobs.c.config, s.jobs.c.variables).where(s.jobs.c.job_id == job_id)).first()


def job_name_as_run(store, job_id: str) -> str:
    row = recorded(store, job_id)
    return parse_job_tree(row.config, json.loads(row.variables))["env"]["job"]["name"]


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "job.conf"
    path.write_text(JOB.format(sink=""))
    return str(path)


@pytest.mark.parametrize("how", ["submit-rest", "submit-store", "seatunnel-rest"])
def test_a_submit_sends_its_shells_environment_and_the_job_gets_it_as_given(serving, conf, tmp_path, how):
    url, store, _ = serving
    assert "SEATIDE_TEST_ODD" not in os.environ       # the coordinator's process: the value can only come sent
    env = shell(SEATIDE_TEST_ODD=ODD)
    if how == "submit-rest":
        result = cli("submit", conf, "--job-id", "odd", "--cluster", url, env=env)
    elif how == "submit-store":
        result = cli("submit", conf, "--job-id", "odd", "--store", f"sqlite:///{tmp_path}/state.db", env=env)
    else:
        result = cli("-c", conf, "-m", "cluster", "-cn", url, "--async", "-n", "odd",
                     module="seatide.cli.seatunnel", env=env)
    assert result.returncode == 0, result.stderr
    job_id = "odd" if how != "seatunnel-rest" else result.stdout.strip().splitlines()[-1]
    # only the name the file falls back to: not HOME, though the value's text names it
    assert json.loads(recorded(store, job_id).variables) == {"$env": "1", "$env.SEATIDE_TEST_ODD": ODD, "$as-given": "1"}
    assert job_name_as_run(store, job_id) == ODD


def test_a_submit_from_a_shell_without_the_name_is_refused_saying_where_it_is_read(serving, conf):
    url, store, _ = serving
    result = cli("submit", conf, "--job-id", "odd", "--cluster", url)
    assert result.returncode == 2, result.stderr
    assert "${SEATIDE_TEST_ODD} is not defined" in result.stderr and "Traceback" not in result.stderr
    assert "environment of the seatide command" in result.stderr
    assert recorded(store, "odd") is None


def test_a_resume_with_a_new_config_sends_the_shells_environment(serving, conf, tmp_path):
    url, store, _ = serving
    assert cli("submit", conf, "--job-id", "odd", "--cluster", url, env=shell(SEATIDE_TEST_ODD="first")).returncode == 0
    changed = tmp_path / "changed.conf"
    changed.write_text(JOB.format(sink=" row.format = json "))
    result = cli("resume", "odd", "--config", str(changed), "--fallback", "fresh", "--cluster", url,
                 env=shell(SEATIDE_TEST_ODD=ODD))
    assert result.returncode == 0, result.stderr
    assert job_name_as_run(store, "odd") == ODD
    result = cli("resume", "odd", "--fallback", "fresh", "--cluster", url, "-i", "unused=1")
    assert result.returncode == 0, result.stderr
    assert job_name_as_run(store, "odd") == ODD         # no new config: the job keeps its recorded environment


@pytest.mark.parametrize("module", ["seatide.cli.main", "seatide.cli.seatunnel"])
@pytest.mark.parametrize("pair", ["$x=1", "$env.HOME=/x", "=1"])
def test_a_variable_name_seatide_keeps_is_refused_by_the_cli(conf, tmp_path, module, pair):
    words = (["submit", conf, "--store", f"sqlite:///{tmp_path}/state.db"] if module == "seatide.cli.main"
             else ["-c", conf, "-m", "cluster", "--store", f"sqlite:///{tmp_path}/state.db", "--async"])
    result = cli(*words, "-i", pair, module=module, env=shell(SEATIDE_TEST_ODD="x"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and ("'$'" in result.stderr or "name=value" in result.stderr), result.stderr


@pytest.mark.cluster
def test_seatide_run_records_its_environment_and_the_job_writes_the_value(tmp_path):
    """Embedded: ``seatide run`` captures, and its driver writes the captured value as given, its text
    ``${HOME}`` too (Spark's own SQL substitution, which took it out of a FakeSource row, is off)."""
    odd = ODD
    out = tmp_path / "out"
    conf = tmp_path / "job.conf"
    conf.write_text("""
env { job.mode = BATCH }
source { FakeSource { schema = { fields { id = bigint, v = string } }, rows = [{ kind = INSERT, fields = [1, ${SEATIDE_TEST_ODD}] }] } }
sink { LocalFile { path = ${SEATIDE_TEST_OUT}, file_format_type = json } }
""")
    data_dir = tmp_path / "d"
    result = cli("run", str(conf), "--job-id", "odd", "--data-dir", str(data_dir),
                 env=shell(SEATIDE_TEST_ODD=odd, SEATIDE_TEST_OUT=str(out)))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for path in out.rglob("*.json") for line in path.read_text().splitlines() if line]
    assert rows == [{"id": 1, "v": odd}], rows
    from seatide.store.address import default_store_url
    from seatide.store.db import open_store

    store = open_store(default_store_url(str(data_dir)))
    try:
        assert json.loads(recorded(store, "odd").variables) == {
            "$env": "1", "$env.SEATIDE_TEST_ODD": odd, "$env.SEATIDE_TEST_OUT": str(out), "$as-given": "1"}
    finally:
        store.dispose()


DEEP = "env { job.name = ${SEATIDE_TEST_ODD} }\nx = " + "[" * 3000 + "\n"


def test_capture_of_a_text_nested_too_deep_to_parse_still_takes_its_names():
    from seatide.config.job_text import captured_environment

    assert captured_environment(DEEP, {}, {"SEATIDE_TEST_ODD": "v", "HOME": "/h"}) == {"SEATIDE_TEST_ODD": "v"}


@pytest.mark.parametrize("where", ["rest", "store"])
def test_a_submit_of_a_text_nested_too_deep_exits_2_saying_so(serving, tmp_path, where):
    """``x = [[[...`` 3000 deep: the submitting command's capture (and the store's load) was a RecursionError's
    traceback (outside review L4)."""
    url, _, _ = serving
    deep = tmp_path / "deep.conf"
    deep.write_text(DEEP)
    to = ["--cluster", url] if where == "rest" else ["--store", f"sqlite:///{tmp_path}/state.db"]
    result = cli("submit", str(deep), *to, env=shell(SEATIDE_TEST_ODD="v"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "nest more than 100 levels deep" in result.stderr
