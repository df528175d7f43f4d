"""A real Hive metastore for the Hive tests: the thrift service from PySpark's own Hive 2.3 jars,
backed by a fresh database in the shared PostgreSQL, on a free port; stopped (and its database
dropped) at the end of the module that uses it. Start-up is about 10 s on a quiet machine.

``spark_sql(uri, warehouse, statements)`` runs statements in a separate, Hive-enabled Spark
session (its own process) against the metastore and returns each result's rows, so a test
checks a table the way another engine sees it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pyspark
import pytest
from sqlalchemy import create_engine, text

from seatide.testing.cluster import free_port
from seatide.testing.pg_tablespace import in_memory

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
POSTGRES_JAR = "/usr/share/java/postgresql.jar"
STARTUP_DEADLINE_S = 240.0

SITE = """<configuration>
<property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:postgresql://127.0.0.1:5432/{db}</value></property>
<property><name>javax.jdo.option.ConnectionDriverName</name><value>org.postgresql.Driver</value></property>
<property><name>javax.jdo.option.ConnectionUserName</name><value>postgres</value></property>
<property><name>javax.jdo.option.ConnectionPassword</name><value></value></property>
<property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
<property><name>hive.metastore.schema.verification</name><value>false</value></property>
<property><name>hive.async.log.enabled</name><value>false</value></property>
<property><name>hive.metastore.warehouse.dir</name><value>file://{warehouse}</value></property>
</configuration>
"""


@dataclass(frozen=True)
class Metastore:
    uri: str
    warehouse: str
    workdir: str


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def hive_metastore(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("hive-metastore"))
    warehouse = os.path.join(workdir, "warehouse")
    database = f"hms_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {database}{in_memory()}"))
    with open(os.path.join(workdir, "hive-site.xml"), "w") as handle:
        handle.write(SITE.format(db=database, warehouse=warehouse))
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    port = free_port()
    log = open(os.path.join(workdir, "metastore.log"), "w")
    process = subprocess.Popen(["java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-cp",
                                os.pathsep.join([workdir, jars, POSTGRES_JAR]),
                                "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port)],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(workdir, "metastore.log")) as handle:
                    raise RuntimeError("the Hive metastore did not start:\n" + handle.read()[-3000:])
            time.sleep(0.3)
        yield Metastore(f"thrift://127.0.0.1:{port}", warehouse, workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        admin.dispose()


# Plain Spark with Hive support, in a JVM started as SeaTide's drivers start theirs: their class
# archive, C1-only JIT and serial GC (runtime/session.py), which change how fast it starts, not what
# it reads. With Spark's default JVM this one session was half the Hive story's CPU (26-28 CPU-s
# against 9, measured alternately at load 15, 2026-12-02).
_SPARK_SQL = """
import json, sys
from pyspark.sql import SparkSession
from seatide.runtime import spark_home
from seatide.runtime.session import session_conf
uri, warehouse, statements = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spark_home.use()            # the Spark home the class archive was built over
jvm = session_conf()
spark = (SparkSession.builder.master("local[1]").appName("hive-check").config("spark.ui.enabled", "false")
         .config("spark.sql.catalogImplementation", "hive").config("spark.hadoop.hive.metastore.uris", uri)
         .config("spark.sql.warehouse.dir", warehouse).config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", jvm["spark.driver.extraJavaOptions"])
         .config("spark.driver.extraClassPath", jvm["spark.driver.extraClassPath"])
         .enableHiveSupport().getOrCreate())
out = []
for statement in statements:
    out.append([list(r) for r in spark.sql(statement).collect()])
print("RESULT " + json.dumps(out, default=str))
spark.stop()
"""


def spark_sql(metastore: Metastore, statements: list[str]) -> list[list[list]]:
    """Each statement's rows, run by a separate Hive-enabled Spark session through the metastore."""
    result = subprocess.run([sys.executable, "-c", _SPARK_SQL, metastore.uri, metastore.warehouse,
                             json.dumps(statements)], capture_output=True, text=True, timeout=600,
                            cwd=metastore.workdir, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        raise AssertionError(f"Spark SQL failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


__all__ = ["Metastore", "hive_metastore", "spark_sql"]
