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
@pytest.mark.parametrize("staged_by", ["spark", "driver"])
def test_a_value_too_long_for_its_column_fails_the_batch_and_lands_nothing(spark, db, tmp_path, keys, staged_by):
    if "mariadb" not in db[0]:
        pytest.skip("PostgreSQL has no sql_mode: it always refuses")
    table = table_name()
    execute(db, f"CREATE TABLE {table} (id BIGINT{' PRIMARY KEY' if keys else ''}, name VARCHAR(3))")
    # Spark's sessions as on a server without strict modes, as many are (the sink's own sessions
    # are shown strict whatever they start with below)
    writer = open_sink(make_sink(db, table=table, primary_keys=keys,
                                 properties={"sessionVariables": "sql_mode='NO_ENGINE_SUBSTITUTION'"}),
                       context(spark, table))
    df = frame(spark, [(1, "ab", RowKind.INSERT), (2, "abcdef", RowKind.INSERT), (3, "c", RowKind.INSERT)],
               "id bigint, name string")
    with pytest.raises(Exception, match=r"(?i)too long|value too long"):
        write(writer, tmp_path, on_driver(df) if staged_by == "driver" else df, 0)
    assert query(db, f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_the_sinks_own_sessions_refuse_what_does_not_fit_in_any_table(db):
    """The sessions that stage a driver's rows and apply every batch (not Spark's) are strict for
    MyISAM too, whatever mode the server gives them."""
    from seatide.connectors.jdbc.sink_session import open_session

    if "mariadb" not in db[0]:
        pytest.skip("PostgreSQL has no sql_mode: it always refuses")
    with open_session(make_sink(db, table="unused").spec(), None) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT @@SESSION.sql_mode")
        assert "STRICT_ALL_TABLES" in cursor.fetchone()[0].split(",")
