"""Which jobs a warm driver's session can run (``warm_session_fit``), and the list of
Spark's static SQL settings that rule leans on, checked against the JVM itself."""

from __future__ import annotations

from seatide.config.env import read_env
from seatide.config.loader import spark_conf_for
from seatide.runtime.session import DEFAULT_CONF, STATIC_SQL_CONF, warm_session_fit
from seatide.runtime.warm_driver import warm_session_conf

WARM = warm_session_conf()


def _job_conf(env: dict) -> dict[str, str]:
    return spark_conf_for(read_env(env))


def test_a_job_that_sets_nothing_fits_as_is():
    assert warm_session_fit(_job_conf({}), WARM) == warm_session_fit({}, WARM)
    assert warm_session_fit(_job_conf({}), WARM).runtime_conf == {}
    assert warm_session_fit(_job_conf({}), WARM).cold_because is None


def test_runtime_sql_settings_are_set_on_the_warm_session():
    fit = warm_session_fit(_job_conf({"spark.sql.shuffle.partitions": 8, "checkpoint.retained": 5,
                                      "spark": {"sql": {"ansi": {"enabled": "false"}}}}), WARM)
    assert fit.cold_because is None
    assert fit.runtime_conf == {"spark.sql.shuffle.partitions": "8", "spark.sql.ansi.enabled": "false",
                                "spark.sql.streaming.minBatchesToRetain": "5"}


def test_master_memory_jars_and_static_sql_settings_need_a_cold_driver():
    cases = {"spark.master": "local[1]", "spark.driver.memory": "2g", "spark.executor.memory": "1g",
             "spark.jars": "/opt/x.jar", "spark.driver.extraJavaOptions": "-Dx=1",
             "spark.sql.warehouse.dir": "/tmp/w", "spark.sql.extensions": "a.B", "spark.ui.enabled": "true"}
    for key, value in cases.items():
        fit = warm_session_fit(_job_conf({key: value}), WARM)
        assert fit.cold_because is not None and fit.cold_because.startswith(key), (key, fit)
        assert fit.runtime_conf == {}


def test_a_setting_equal_to_the_warm_sessions_changes_nothing():
    same = {"spark.master": "local[*]", "spark.ui.enabled": DEFAULT_CONF["spark.ui.enabled"],
            "spark.sql.shuffle.partitions": DEFAULT_CONF["spark.sql.shuffle.partitions"]}
    assert warm_session_fit(_job_conf(same), WARM) == warm_session_fit({}, WARM)


def test_the_static_sql_list_is_sparks(spark):
    """Spark's own registry of static SQL settings (StaticSQLConf), read by reflection: an
    upgrade that adds one fails here, not in a job that set it and got a warm driver."""
    jvm = spark._jvm
    holder = jvm.java.lang.Class.forName("org.apache.spark.sql.internal.StaticSQLConf$")
    module = holder.getField("MODULE$").get(None)
    keys = set()
    for method in holder.getDeclaredMethods():
        if method.getParameterCount() == 0 and "ConfigEntry" in method.getReturnType().getName():
            method.setAccessible(True)
            keys.add(method.invoke(module, None).key())
    assert keys == STATIC_SQL_CONF
    assert not any(spark.conf.isModifiable(key) for key in STATIC_SQL_CONF)
    assert all(spark.conf.isModifiable(key) for key in ("spark.sql.shuffle.partitions", "spark.sql.ansi.enabled",
                                                         "spark.sql.streaming.minBatchesToRetain"))
