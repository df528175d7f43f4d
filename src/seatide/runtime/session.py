"""The SparkSession a driver runs its pipelines in."""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field

from seatide.config.env import SQL_SUBSTITUTION
from seatide.runtime import class_archive, spark_home
from seatide.runtime.class_path import JDBC_JARS
from seatide.runtime.parent_death import dying_with, in_lifelong_thread
from seatide.secrets import MASK, is_secret_key

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
# Logged as a process forks its JVM: the attempts that never needed Spark are told by its absence.
JVM_STARTING = "starting the JVM"

log = logging.getLogger(__name__)

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
    # On, PySpark wraps every Column and function call in four more calls to the JVM and a walk
    # of the Python stack (with a failing IPython import), to name the Python line in a runtime
    # error: SeaTide's own line, never the job's (HOCON and SQL; SQL's error context stays).
    # Building 20 Assert rules' aggregate: 2.5x the Python CPU and 1.9x the wall time with it on.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Off, always (session_conf; a job may not turn it on, config/env.py): on, Spark fills
    # ${env:NAME} and ${system:name} into every SQL text from the driver's own process, so a
    # job submitted over REST could read a worker's environment (PGPASSWORD) through a Sql
    # query or a FakeSource row, and a value holding the text ${HOME} lost it.
    SQL_SUBSTITUTION: "false",
    "spark.driver.extraJavaOptions": f"{_JAVA_OPTIONS} -Dlog4j2.configurationFile=file:{_LOG_CONFIG}",
    "spark.executor.extraJavaOptions": _JAVA_OPTIONS,
    "spark.driver.extraClassPath": _jdbc_class_path(),
    "spark.executor.extraClassPath": _jdbc_class_path(),
}


# "0" turns the Python zygote off (runtime/python_zygote.py): every runner then starts afresh.
ZYGOTE_ENV = "SEATIDE_PYTHON_ZYGOTE"


def prepare_python_env(master: str = "local[*]", settings: dict[str, str] | None = None) -> None:
    """Python workers must run this interpreter, or Python data sources crash on executors;
    and they start 4x faster from SeaTide's Spark home (see ``spark_home``). With a local
    master, through this process's zygote, which forks streaming source runners already
    started (python_zygote.py); executors elsewhere get the interpreter itself.

    The JVM's own Python work on the driver, the lookup of Python data sources each session
    makes once (a daemon and its worker, 0.3 s of CPU afresh), runs PYSPARK_DRIVER_PYTHON: the
    zygote's client too, which is the interpreter itself for anything the zygote does not fork.

    A job that can bring its own Python (``settings``: its files, its Python processes'
    environment) gets no zygote: zygote_choice.py."""
    python = sys.executable
    if not runs_executors_elsewhere(master) and os.environ.get(ZYGOTE_ENV, "1") != "0":
        from seatide.runtime import python_zygote, zygote_choice

        why = zygote_choice.own_python(settings or {})
        if why:
            log.info("python zygote not used: %s", why)
        else:
            python = python_zygote.start() or sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = python
    spark_home.use()


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
    # The class archive comes before the job's own options: a job may still turn it off
    # (-Xshare:off) or point it elsewhere.
    merged[key] = " ".join(filter(None, [DEFAULT_CONF[key], class_archive.java_options()]
                                  + [layer[key] for layer in (worker, conf) if key in layer]))
    merged[SQL_SUBSTITUTION] = "false"      # whatever a worker's --spark-conf says: see DEFAULT_CONF
    return {**executor_conf(merged), **merged}


def build_session(app_name: str, conf: dict[str, str] | None = None):
    settings = session_conf(conf)
    prepare_python_env(settings["spark.master"], settings)
    from pyspark.sql import SparkSession

    start_jvm({**settings, "spark.app.name": app_name})
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def start_jvm(options: dict[str, str]) -> None:
    """Start this process's JVM, tied to it: SIGKILLed the moment this process dies.

    PySpark starts it from whichever thread builds the first session (a pool thread, in a
    driver) and ends it only when its stdin closes, through Spark's shutdown hooks: a driver
    SIGKILLed left a JVM that ran on for about a second (measured), its streaming queries
    still writing their checkpoints, and a JVM that could not notice (stopped, stuck in a hook)
    lived on for good. So the JVM is forked here, with ``PR_SET_PDEATHSIG``, from a thread that
    lives as long as this process (runtime/parent_death.py), with the options the session's
    builder would give it; the builder then finds it up. Once per process."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext

    with SparkContext._lock:        # PySpark's own, re-entrant: two sessions built at once start one JVM
        if SparkContext._gateway is not None:
            return
        log.info(JVM_STARTING)
        conf = SparkConf()
        for key, value in options.items():
            conf.set(key, value)
        gateway = in_lifelong_thread(lambda: _launch_gateway_dying_with(os.getpid(), conf), name="jvm-parent")
        SparkContext._ensure_initialized(gateway=gateway)


def _launch_gateway_dying_with(parent: int, conf):
    """PySpark's own ``launch_gateway``, its JVM made to die with ``parent``. It passes a
    ``preexec_fn`` of its own to ``Popen``, in place of any given in ``popen_kwargs``: so its
    ``Popen`` is wrapped for the one call, adding ours after PySpark's."""
    from pyspark import java_gateway

    popen = java_gateway.Popen

    def dying_with_parent(*args, preexec_fn=None, **kwargs):
        return popen(*args, preexec_fn=dying_with(parent, before=preexec_fn), **kwargs)

    java_gateway.Popen = dying_with_parent
    try:
        return java_gateway.launch_gateway(conf)
    finally:
        java_gateway.Popen = popen


# Spark's static SQL settings (StaticSQLConf of PySpark 4.3): fixed when the session starts,
# like spark.master or memory. tests/runtime/test_warm_session_fit.py compares this list
# with the JVM's, so an upgrade that adds one fails a test instead of a job.
STATIC_SQL_CONF = frozenset({
    "spark.python.sql.dataFrameDebugging.enabled", "spark.sql.artifact.copyFromLocalToFs.allowDestLocal",
    "spark.sql.avro.schemaUrlAllowedSchemes", "spark.sql.broadcastExchange.maxThreadThreshold",
    "spark.sql.cache.serializer", "spark.sql.catalog.spark_catalog.defaultDatabase",
    "spark.sql.catalogImplementation", "spark.sql.codegen.cache.maxEntries", "spark.sql.codegen.comments",
    "spark.sql.debug", "spark.sql.defaultUrlStreamHandlerFactory.enabled", "spark.sql.event.truncate.length",
    "spark.sql.extensions", "spark.sql.extensions.test.loadFromCp", "spark.sql.filesourceTableRelationCacheSize",
    "spark.sql.globalTempDatabase", "spark.sql.hive.thriftServer.http.sniHostCheckEnabled",
    "spark.sql.hive.thriftServer.singleSession", "spark.sql.kafka.disallowedOptions",
    "spark.sql.legacy.hive.thriftServer.allowSettingSystemProperties",
    "spark.sql.legacy.sessionInitWithConfigDefaults", "spark.sql.metadataCacheTTLSeconds",
    "spark.sql.queryExecutionListeners", "spark.sql.reflect.allowList", "spark.sql.restrictedMode.enabled",
    "spark.sql.resultQueryStage.maxThreadThreshold", "spark.sql.shuffleExchange.maxThreadThreshold",
    "spark.sql.sources.disabledJdbcConnProviderList", "spark.sql.sources.schemaStringLengthThreshold",
    "spark.sql.streaming.streamingQueryListeners", "spark.sql.streaming.ui.enabled",
    "spark.sql.streaming.ui.enabledCustomMetricList", "spark.sql.streaming.ui.retainedProgressUpdates",
    "spark.sql.streaming.ui.retainedQueries", "spark.sql.subquery.maxThreadThreshold",
    "spark.sql.ui.retainedExecutions", "spark.sql.warehouse.dir",
})


@dataclass(frozen=True)
class WarmFit:
    """How a job's Spark settings meet a warm driver's session (see ``warm_session_fit``)."""

    runtime_conf: dict[str, str] = field(default_factory=dict)   # set on the warm session first
    cold_because: str | None = None                              # None: a warm driver may run it


def warm_session_fit(conf: dict[str, str] | None, warm_conf: dict[str, str]) -> WarmFit:
    """Whether a job whose Spark settings are ``conf`` (``spark_conf_for``) may run in a warm
    driver, whose session ``build_session`` built with ``warm_conf`` (the settings of a job
    that sets none: ``runtime.warm_driver.warm_session_conf``) over ``DEFAULT_CONF``.

    * A setting equal to the warm session's changes nothing.
    * A runtime SQL setting (``spark.sql.*`` and not in ``STATIC_SQL_CONF``) goes into
      ``runtime_conf``: the warm driver sets it with ``spark.conf.set`` before the attempt
      runs, which is what ``build_session`` would have done for a cold driver.
    * Anything else differs in a way a running JVM cannot take: ``spark.master``, memory,
      jars and class paths, Java options, static SQL settings, any other ``spark.*``. The job
      gets a cold driver started with its settings, and ``cold_because`` names the first one.

    >>> warm = {"spark.master": "local[*]"}
    >>> warm_session_fit({"spark.sql.shuffle.partitions": "8"}, warm).runtime_conf
    {'spark.sql.shuffle.partitions': '8'}
    >>> warm_session_fit({"spark.master": "local[4]"}, warm).cold_because
    "spark.master is 'local[4]', the warm session's is 'local[*]'"
    """
    session = {**DEFAULT_CONF, **warm_conf}
    runtime: dict[str, str] = {}
    for key, value in sorted((conf or {}).items()):
        value = str(value)
        if session.get(key) == value:
            continue
        if key.startswith("spark.sql.") and key not in STATIC_SQL_CONF:
            runtime[key] = value
            continue
        warm = session.get(key)
        if is_secret_key(key):      # a credential (spark.hadoop.fs.s3a.secret.key): its name says enough
            value, warm = MASK, None if warm is None else MASK
        return WarmFit(cold_because=f"{key} is {value!r}, the warm session's is "
                                    f"{'unset' if warm is None else repr(warm)}")
    return WarmFit(runtime_conf=runtime)


def activate_session(spark) -> None:
    """Make ``spark`` the JVM thread's active session.

    A JVM thread without one analyses plans under the fallback SQL conf, not the session's:
    spark.sql.timeType.enabled and the session time zone are then ignored, and a plan that
    holds a TIME value fails with UNSUPPORTED_TIME_TYPE (``writeStream`` of a checkpointed
    pipeline, an aggregation in a plain batch). Each Python thread is a JVM thread of its own.
    """
    spark._jvm.org.apache.spark.sql.classic.SparkSession.setActiveSession(spark._jsparkSession)
