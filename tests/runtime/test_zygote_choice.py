"""A driver whose job can bring its own Python runs Spark's Python processes with the interpreter
itself, and starts no zygote (runtime/zygote_choice.py; second outside review, findings 1, 2, 4).

Spark puts a job's --py-files and spark.files on a worker's path after the worker has started, where
no request shows them: a forked worker imported the zygote's copy of a library the job ships. And
a driver whose PYTHONPATH holds its own directory had every request refused, after paying for the
zygote's start. Each case is a driver of its own (a process), as the session would prepare it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

DRIVER = """
import json, os, sys
from seatide.runtime import python_zygote, session
settings = session.session_conf(json.loads(sys.argv[1]))
session.prepare_python_env(settings["spark.master"], settings)
print(json.dumps({"python": os.environ["PYSPARK_PYTHON"], "zygote": python_zygote.started() is not None}))
"""


def _driver(conf: dict[str, str], **env: str) -> dict:
    environ = {**os.environ, **env}
    environ.pop("SEATIDE_PYTHON_ZYGOTE", None)      # the test run's own setting must not decide the case
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(conf)], env=environ, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_job_that_brings_no_python_of_its_own_gets_the_zygote():
    chosen = _driver({})
    assert chosen["zygote"] and chosen["python"] != sys.executable


@pytest.mark.parametrize("conf, env", [
    ({"spark.submit.pyFiles": "/jobs/deps.zip"}, {}),
    ({"spark.files": "/jobs/lookup.csv,/jobs/helpers.py"}, {}),
    ({"spark.archives": "/jobs/env.tar.gz#env"}, {}),
    ({"spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system"}, {}),
    ({"spark.pyspark.python": sys.executable}, {}),
    ({}, {"ARROW_DEFAULT_MEMORY_POOL": "system"}),
    ({}, {"NUMPY_MADVISE_HUGEPAGE": "0"}),
    ({}, {"PYTHONPATH": "/app"}),
    ({}, {"PYTHONHASHSEED": "random"}),
], ids=["py-files", "python-among-files", "archives", "executor-env", "pyspark-python", "arrow-env", "numpy-env",
        "foreign-pythonpath", "random-hash-seed"])
def test_a_job_that_can_bring_its_own_python_runs_the_interpreter_itself(conf, env):
    chosen = _driver(conf, **env)
    assert chosen == {"python": sys.executable, "zygote": False}


def test_files_that_are_not_python_leave_the_zygote_in_use():
    chosen = _driver({"spark.files": "/jobs/lookup.csv"})
    assert chosen["zygote"]
