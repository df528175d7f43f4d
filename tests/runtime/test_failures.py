"""Failures are permanent or retried by their cause (SQLSTATE), not by exception class:
real failures from the shared SparkSession and a real JDBC driver."""

from __future__ import annotations

import pytest

from seatide.runtime.failures import describe_error
from seatide.testing.cluster import free_port


def _failure(action) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


@pytest.mark.parametrize("query, state", [
    ("select nope", "42703"),                          # an AnalysisException: the query is wrong
    ("select 1 / 0", "22012"),                         # an arithmetic error in the data, not an AnalysisException
    ("select cast('x' as int)", "22018"),              # a value that does not cast
])
def test_a_wrong_query_or_wrong_data_is_permanent(spark, query, state):
    exc = _failure(lambda: spark.sql(query).collect())
    message, permanent = describe_error(exc)
    assert permanent, message
    assert state in message


def test_a_missing_path_is_permanent(spark, tmp_path):
    exc = _failure(lambda: spark.read.parquet(str(tmp_path / "nothing-here")).collect())
    assert describe_error(exc)[1]


def test_a_database_that_refuses_the_connection_is_retried(spark):
    reader = (spark.read.format("jdbc").option("url", f"jdbc:postgresql://127.0.0.1:{free_port()}/test")
              .option("dbtable", "t").option("driver", "org.postgresql.Driver"))
    exc = _failure(lambda: reader.load().collect())
    message, permanent = describe_error(exc)
    assert not permanent, message
    assert "refused" in message.lower() or "connect" in message.lower()


def test_a_refused_login_is_permanent_and_named():
    """A wrong password or user fails every retry the same way: it fails the job at once, with
    the database's refusal in its message (issue 31: it was retried with back-off). The Python
    client is what a Jdbc source logs in with on the driver (jdbc/read_types.py)."""
    import pymysql

    exc = _failure(lambda: pymysql.connect(host="127.0.0.1", port=3306, user="seatide_nobody", password="wrong",
                                           ssl_disabled=True))
    message, permanent = describe_error(exc)
    assert "Access denied" in message
    assert permanent, message
