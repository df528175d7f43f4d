"""The Jdbc sink's own database sessions, and the limits that keep an orphan from holding up its
replacement.

A driver cut off mid-batch (its host partitioned, its process paused) leaves its session open on
the server, inside a transaction that holds the batch's commit record and the rows it applied;
the server keeps such a session until TCP keepalive gives up, about two hours. The driver fences
itself and is replaced, and the replacement's commit of the same batch waits on that record:
PostgreSQL for ever, MySQL until ``innodb_lock_wait_timeout``, after which the batch fails, and
every retry with it. So every session the sink opens says, when it opens:

* a transaction left idle for ``IDLE_IN_TRANSACTION_S`` is ended by the server, and its locks
  with it (PostgreSQL ``idle_in_transaction_session_timeout``, MariaDB ``idle_transaction_timeout``;
  MySQL has neither, and gets ``wait_timeout``, which counts idle time outside transactions too);
* a lock is waited for at most ``lock_wait_s()``: longer than an orphan can live, so the
  replacement waits for the orphan's end rather than failing (PostgreSQL ``lock_timeout``; MySQL
  ``innodb_lock_wait_timeout``, and ``lock_wait_timeout`` for the DDL of save modes and schema
  changes). The sink's named locks (named_lock.py) wait as long.

A live writer is never idle that long: where it waits inside a transaction (other tables still
staging) it speaks every ``keepalive_every_s()`` (``keep_alive``).
"""

from __future__ import annotations

import contextlib
import math

from seatide.connectors.jdbc.spec import JdbcSinkError, JdbcSinkSpec
from seatide.connectors.jdbc.url import POSTGRESQL

# A sink session idle this long inside a transaction is ended by the server. Far above any pause
# of a live writer (it speaks every keepalive_every_s() while it waits), and short enough that a
# bounded job whose driver was cut off still finishes soon after its replacement starts.
IDLE_IN_TRANSACTION_S = 60.0
# Every MySQL/MariaDB session the sink writes through refuses a value that does not fit its
# column, whatever the server's own sql_mode: STRICT_ALL_TABLES, not only the STRICT_TRANS_TABLES
# Connector/J adds, because in a MyISAM staging table that mode truncates every row after a
# multi-row INSERT's first (rewriteBatchedStatements) with only a warning, and a server without
# either (MySQL 5.6's default) truncates or clamps any value. Appended, so the server's other
# modes still hold; an empty sql_mode gives a leading comma, which the server ignores. Without
# spaces: Connector/J's sessionVariables takes it as written too.
MYSQL_STRICT_MODE = "sql_mode=concat(@@sql_mode,',STRICT_ALL_TABLES')"
# What a lock wait adds to the idle limit: an orphan's session has surely ended by then.
LOCK_WAIT_MARGIN_S = 30.0
_UNKNOWN_VARIABLE = 1193     # MySQL's ER_UNKNOWN_SYSTEM_VARIABLE (idle_transaction_timeout is MariaDB's)


def lock_wait_s() -> float:
    return IDLE_IN_TRANSACTION_S + LOCK_WAIT_MARGIN_S


def keepalive_every_s() -> float:
    return IDLE_IN_TRANSACTION_S / 6


def open_session(spec: JdbcSinkSpec, database: str | None) -> "SinkSession":
    """A DB-API connection to ``database`` (None: the URL's) with the limits above."""
    idle, wait = math.ceil(IDLE_IN_TRANSACTION_S), math.ceil(lock_wait_s())
    url = spec.url
    if url.dialect == POSTGRESQL:
        limits = f"-c idle_in_transaction_session_timeout={idle * 1000} -c lock_timeout={wait * 1000}"
        return SinkSession(url.connect(spec.user, spec.password, database=database,
                                       connect_timeout=spec.connect_timeout, options=limits))
    conn = url.connect(spec.user, spec.password, database=database, connect_timeout=spec.connect_timeout)
    cursor = conn.cursor()
    try:
        # the user's own session variables first, as Spark's sessions get them (a time_zone
        # changes what a TIMESTAMP stores); the limits and the strict mode after, so they hold
        for variables in user_session_variables(spec):
            try:
                cursor.execute(f"SET SESSION {variables}")
            except Exception as exc:  # noqa: BLE001 - the server's refusal, named with the option
                raise JdbcSinkError(f"Jdbc sink: sessionVariables '{variables}' (option 'url' or 'properties'): "
                                    f"the server refused them: {exc}; give name=value pairs separated by "
                                    "commas, as MySQL's SET takes them") from None
        cursor.execute(f"SET SESSION innodb_lock_wait_timeout = %s, lock_wait_timeout = %s, {MYSQL_STRICT_MODE}",
                       (wait, wait))
        try:
            cursor.execute("SET SESSION idle_transaction_timeout = %s", (idle,))
        except Exception as exc:  # noqa: BLE001 - MySQL: the variable is MariaDB's
            if not exc.args or exc.args[0] != _UNKNOWN_VARIABLE:
                raise
            cursor.execute("SET SESSION wait_timeout = %s", (idle,))
    except BaseException:
        conn.close()
        raise
    return SinkSession(conn)


def user_session_variables(spec: JdbcSinkSpec) -> list[str]:
    """MySQL session variables the user gave (Connector/J's ``sessionVariables``): the URL's,
    then ``properties``' (as written, ``name=value`` pairs separated by commas)."""
    return [v for v in (spec.url.raw_param("sessionVariables"), spec.properties.get("sessionVariables")) if v]


def spark_write(spec: JdbcSinkSpec, url: str) -> tuple[str, dict]:
    """The URL (``url``: the spec's, as ``for_spark`` gave it) and JDBC properties for Spark's
    writes into staging tables, over the user's ``properties``: the driver sends a batch of INSERTs
    as multi-row statements (measured with PostgreSQL, 1M rows of three fields from two partitions:
    2-2.5x faster); a MySQL session is strict whatever else it is given."""
    given = spec.properties
    if spec.url.dialect == POSTGRESQL:
        # stringtype=unspecified: strings go untyped, so PostgreSQL reads each with the input
        # function of its column (json, xml, inet, geometry, bit, interval, an enum, ...)
        # instead of refusing a varchar for them.
        return url, {"reWriteBatchedInserts": "true", "stringtype": "unspecified", **given}
    # Connector/J sets these after its own sql_mode, in the order given: ours comes last. A
    # URL's sessionVariables would replace the property's, ours with it: it moves to the property.
    variables = ",".join([*user_session_variables(spec), MYSQL_STRICT_MODE])
    return spec.url.without_param(url, "sessionVariables"), \
        {"rewriteBatchedStatements": "true", **given, "sessionVariables": variables}


def keep_alive(conn) -> None:
    """Show the server this session is alive (it waits inside a transaction for Spark)."""
    cursor = conn.cursor()
    cursor.execute("SELECT 1")
    cursor.fetchall()


class SinkSession:
    """Closes the connection on exit, rolling back what was not committed."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        return self.conn

    def __exit__(self, *exc):
        # a session the server ended has nothing left to roll back; the error that ended the
        # batch, if any, is the one to report
        with contextlib.suppress(Exception):
            self.conn.rollback()
        with contextlib.suppress(Exception):
            self.conn.close()
        return False


def loadable_driver(spec: JdbcSinkSpec, spark) -> str:
    """The ``driver`` class (MySQL's Connector/J names stand for the bundled MariaDB driver)."""
    driver = spec.driver       # already resolved by the sink (url.driver_class)
    if spark is None or _jvm_has_class(spark, driver):
        return driver
    raise JdbcSinkError(f"Jdbc sink: option 'driver': class {driver} is not on the class path; use "
                        f"{spec.url.default_driver} or add the driver's jar to SeaTide's JDBC jars")


def _jvm_has_class(spark, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)
        return True
    except Exception:
        return False


__all__ = ["IDLE_IN_TRANSACTION_S", "SinkSession", "keep_alive", "keepalive_every_s", "loadable_driver", "lock_wait_s",
           "open_session", "spark_write", "user_session_variables"]
