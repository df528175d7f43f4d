"""The SparkSession a driver runs its pipelines in."""

from __future__ import annotations

import json
import os
import sys

# Measured on a 2-core machine: C1-only JIT and the serial GC start Spark ~30% faster
# and cost nothing noticeable for SeaTide's short-lived drivers.
_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_LOG_CONFIG = os.path.join(os.path.dirname(__file__), "log4j2.properties")
# The worker hands a driver its job's Spark settings here (not on the command line, where
# `ps` would show any secret among them).
SPARK_CONF_ENV = "SEATIDE_SPARK_CONF"
# A worker's own Spark settings (`seatide cluster worker --spark-conf KEY=VALUE`), handed to
# each driver it launches: defaults under every job's env, e.g. the cluster's spark.master.
WORKER_SPARK_CONF_ENV = "SEATIDE_WORKER_SPARK_CONF"

# JDBC drivers from Debian (libpostgresql-jdbc-java, libmariadb-java). On the JVM's own class
# path, java.sql.DriverManager finds them on the driver as well as in executors; spark.jars
# would reach executors only through a class loader DriverManager does not consult.
JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")


def _jdbc_class_path() -> str:
    return os.pathsep.join(jar for jar in JDBC_JARS if os.path.exists(jar))


DEFAULT_CONF = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.timeType.enabled": "true",          # SeaTunnel's `time` type
    "spark.driver.extraJavaOptions": f"{_JAVA_OPTIONS} -Dlog4j2.configurationFile=file:{_LOG_CONFIG}",
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    "spark.driver.extraClassPath": _jdbc_class_path(),
    "spark.executor.extraClassPath": _jdbc_class_path(),
}


def prepare_python_env() -> None:
    """Python workers must run this interpreter, or Python data sources crash on executors."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def runs_executors_elsewhere(master: str) -> bool:
    """True unless every executor is a thread of the driver's own JVM (local, local[N])."""
    return not (master == "local" or master.startswith("local["))


def executor_conf(conf: dict[str, str]) -> dict[str, str]:
    """What executors in other processes (a standalone cluster's workers) need to run our code.

    Python data sources and UDFs are unpickled in the executors' Python workers, which import
    ``seatide``. Spark puts ``spark.executorEnv.PYTHONPATH`` before its own path there, so
    the executors import the same SeaTide as this driver (and the driver's other paths, e.g.
    a job's UDF modules); those directories must exist on every node (docs/spark-cluster.md).
    The interpreter is the driver's (PYSPARK_PYTHON, set by ``prepare_python_env``).
    """
    if not runs_executors_elsewhere(conf["spark.master"]):
        return {}
    import seatide

    home = os.path.dirname(os.path.dirname(os.path.abspath(seatide.__file__)))
    paths = [home] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != home]
    return {"spark.executorEnv.PYTHONPATH": os.pathsep.join(paths)}


def worker_conf() -> dict[str, str]:
    """The launching worker's --spark-conf settings (none for a driver started otherwise)."""
    raw = os.environ.get(WORKER_SPARK_CONF_ENV)
    return json.loads(raw) if raw else {}


def session_conf(conf: dict[str, str] | None = None) -> dict[str, str]:
    """SeaTide's defaults, then the worker's settings, then the job's env (the job wins)."""
    conf, worker = conf or {}, worker_conf()
    merged = {**DEFAULT_CONF, **worker, **conf}
    # The driver's JVM options add up: ours carry the log configuration and the fast-start flags.
    key = "spark.driver.extraJavaOptions"
    merged[key] = " ".join([DEFAULT_CONF[key]] + [layer[key] for layer in (worker, conf) if key in layer])
    return {**executor_conf(merged), **merged}


def build_session(app_name: str, conf: dict[str, str] | None = None):
    prepare_python_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in session_conf(conf).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
