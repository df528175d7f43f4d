"""Which Spark settings a driver's session gets: SeaTide's defaults, then its worker's
--spark-conf, then the job's env; and what executors in other processes are given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import seatide
from seatide import intents
from seatide.runtime.session import WORKER_SPARK_CONF_ENV, executor_conf, session_conf
from seatide.store.address import default_store_url
from seatide.store.db import open_store
from seatide.worker.agent import Worker

SEATIDE_HOME = os.path.dirname(os.path.dirname(os.path.abspath(seatide.__file__)))
CLUSTER = "spark://127.0.0.1:7077"


def test_the_job_env_wins_over_the_worker_which_wins_over_the_defaults(monkeypatch):
    assert session_conf({})["spark.master"] == "local[*]"
    monkeypatch.setenv(WORKER_SPARK_CONF_ENV, json.dumps({"spark.master": CLUSTER, "spark.executor.memory": "2g"}))
    merged = session_conf({"spark.executor.memory": "3g"})
    assert merged["spark.master"] == CLUSTER and merged["spark.executor.memory"] == "3g"
    assert session_conf({"spark.master": "local[2]"})["spark.master"] == "local[2]"


def test_sessions_leave_out_pysparks_python_call_sites(spark):
    """Each Column call would cost four more JVM round trips (runtime/session.py, DEFAULT_CONF)."""
    assert session_conf({})["spark.python.sql.dataFrameDebugging.enabled"] == "false"
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"


def test_executors_elsewhere_get_the_drivers_seatide_first_on_their_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/udfs", SEATIDE_HOME]))
    paths = executor_conf({"spark.master": CLUSTER})["spark.executorEnv.PYTHONPATH"].split(os.pathsep)
    assert paths == [SEATIDE_HOME, "/opt/udfs"]
    assert session_conf({"spark.master": CLUSTER})["spark.executorEnv.PYTHONPATH"].startswith(SEATIDE_HOME)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_local_sessions_need_nothing_for_executors(master):
    assert executor_conf({"spark.master": master}) == {}


def test_a_path_the_user_sets_wins():
    merged = session_conf({"spark.master": CLUSTER, "spark.executorEnv.PYTHONPATH": "/srv/seatide/src"})
    assert merged["spark.executorEnv.PYTHONPATH"] == "/srv/seatide/src"


def test_a_worker_hands_its_spark_conf_to_every_driver(tmp_path):
    data_dir = str(tmp_path)
    store = open_store(default_store_url(data_dir))
    job = 'env { job.mode = BATCH }\nsource { FakeSource { row.num = 1, schema = { fields { a = int } } } }\nsink { Console {} }\n'
    intents.submit(store, data_dir, text=job, job_id="handed", actor="test")
    worker = Worker(store, default_store_url(data_dir), data_dir, node_id="w", spark_conf={"spark.master": CLUSTER})
    env = worker._driver_env("handed")
    assert json.loads(env[WORKER_SPARK_CONF_ENV]) == {"spark.master": CLUSTER}
    assert "spark.master" not in json.loads(env["SEATIDE_SPARK_CONF"])     # the job names none: the worker's applies
    plain = Worker(store, default_store_url(data_dir), data_dir, node_id="w2")._driver_env("handed")
    assert WORKER_SPARK_CONF_ENV not in plain or plain[WORKER_SPARK_CONF_ENV] == os.environ.get(WORKER_SPARK_CONF_ENV)
    store.dispose()


def test_a_bad_spark_conf_flag_is_refused_before_the_store_is_opened(tmp_path):
    result = subprocess.run([sys.executable, "-m", "seatide.cli.main", "cluster", "worker", "--data-dir", str(tmp_path),
                             "--spark-conf", "master=spark://x:7077"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--spark-conf 'master=spark://x:7077': expected KEY=VALUE with a spark.* key" in result.stderr
    assert not os.path.exists(tmp_path / "state.db")


def test_driver_java_options_add_to_ours_from_worker_and_job(monkeypatch):
    monkeypatch.setenv(WORKER_SPARK_CONF_ENV, json.dumps({"spark.driver.extraJavaOptions": "-Dworker=1"}))
    options = session_conf({"spark.driver.extraJavaOptions": "-Djob=1"})["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=" in options and options.endswith("-Dworker=1 -Djob=1")
