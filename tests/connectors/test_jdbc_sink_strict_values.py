"""A value that does not fit its target column fails the batch on every path, whatever the
server's sql_mode, and no row of the batch lands: MySQL's staging tables are MyISAM, where the
STRICT_TRANS_TABLES Connector/J asks for truncates every row after a multi-row INSERT's first
with only a warning (outside review, stop 66), and a batch staged on the driver ran under the
server's own mode, strict or not."""

from __future__ import annotations

import pytest

from seatide.plugin.rowkind import RowKind
from seatide.plugin.sink_protocol import open_sink
from tests.connectors.jdbc_sink_helpers import (  # noqa: F401 - db: the fixture
    context, db, execute, frame, make_sink, on_driver, query, table_name, write)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("keys", [[], ["id"]], ids=["keyless", "keyed"])
@pytest.mark.parametrize("staged_by, given_in", [("spark", "nothing"), ("spark", "properties"), ("spark", "url"),
                                                 ("driver", "properties")])
def test_a_value_too_long_for_its_column_fails_the_batch_and_lands_nothing(spark, db, tmp_path, keys, staged_by,
                                                                           given_in):
    if "mariadb" not in db[0]:
        pytest.skip("PostgreSQL has no sql_mode: it always refuses")
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT{' PRIMARY KEY' if keys else ''}, name VARCHAR(3))")
    # The sessions as on a server without strict modes, as many are, through the user's own
    # session variables: in the properties, or in the URL, where Connector/J takes them over the
    # properties' (the strict mode went with them: outside review, stop 66). Given nothing, the
    # server's default STRICT_TRANS_TABLES, which let a MyISAM staging table truncate every row
    # after a multi-row INSERT's first.
    variables = "sql_mode='NO_ENGINE_SUBSTITUTION'"
    url, user = db
    if given_in == "url":
        sink = make_sink((f"{url}?sessionVariables={variables}", user), table=table, primary_keys=keys)
    else:
        sink = make_sink(db, table=table, primary_keys=keys,
                         properties={"sessionVariables": variables} if given_in == "properties" else {})
    writer = open_sink(sink, context(spark, table))
    df = frame(spark, [(1, "ab", RowKind.INSERT), (2, "abcdef", RowKind.INSERT), (3, "c", RowKind.INSERT)],
               "id bigint, name string")
    with pytest.raises(Exception, match=r"(?i)too long|value too long"):
        write(writer, tmp_path, on_driver(df) if staged_by == "driver" else df, 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_the_sinks_own_sessions_take_the_users_variables_and_stay_strict(db):
    """The sessions that stage a driver's rows and apply every batch (not Spark's) get the user's
    session variables as Spark's do (a time_zone changes what a TIMESTAMP stores: outside review,
    stop 66), from the URL and the properties, and are strict for MyISAM too whatever those say."""
    from seatide.connectors.jdbc.sink_session import open_session

    if "mariadb" not in db[0]:
        pytest.skip("PostgreSQL has no sql_mode: it always refuses")
    url, user = db
    sink = make_sink((f"{url}?sessionVariables=time_zone='+05:00'", user), table="unused",
                     properties={"sessionVariables": "sql_mode='NO_ENGINE_SUBSTITUTION',div_precision_increment=7"})
    with open_session(sink.spec(), None) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT @@SESSION.sql_mode, @@SESSION.time_zone, @@SESSION.div_precision_increment")
        mode, zone, precision = cursor.fetchone()
        assert "STRICT_ALL_TABLES" in mode.split(",") and (zone, precision) == ("+05:00", 7)


def test_session_variables_the_server_refuses_are_named_with_their_option(db):
    from seatide.connectors.jdbc.sink_session import open_session
    from seatide.connectors.jdbc.spec import JdbcSinkError

    if "mariadb" not in db[0]:
        pytest.skip("sessionVariables are Connector/J's")
    sink = make_sink(db, table="unused", properties={"sessionVariables": "no_such_variable=1"})
    with pytest.raises(JdbcSinkError, match=r"sessionVariables 'no_such_variable=1' .*refused"):
        open_session(sink.spec(), None)
