"""Outside review of 4f9f607: a DDL custom_sql is told apart by ``JdbcSinkSpec.custom_sql_is_ddl``, which
skipped leading ``/* */`` comments only. SeaTunnel's usual statement with a line comment first
(``-- empty it`` or ``# empty it``, newline, ``TRUNCATE TABLE t``) was taken for DML: it ran before the
kept-rows check, in a "transaction" MariaDB commits at once, and no LOCK TABLES was asked for. The
check refused over rows kept, the rollback undid nothing: the kept rows were gone. Review of aef6f1f
(R-C): ``SET STATEMENT ... FOR TRUNCATE`` and an executable comment ``/*! TRUNCATE ... */`` the same; so
only a statement that is plainly DML (DELETE, UPDATE, INSERT, REPLACE first) is DML now. Real MariaDB."""

from __future__ import annotations

import secrets

import pytest

from seatide.connectors.jdbc.spec import JdbcSinkError
from seatide.plugin.base import PermanentError
from tests.connectors.test_jdbc_sink_privileges import (  # noqa: F401 - fixtures
    _admin, _opened_target, _rows, locking_user, seatunnel_user)


@pytest.mark.parametrize("comment", ["-- empty it\n", "# empty it\n", "/* a */ -- b\n# c\n",
                                     "SET STATEMENT max_statement_time=60 FOR ", "/*!50001 ", "/*M!100000 ", "/*!"])
@pytest.mark.parametrize("user", ["seatunnel_user", "locking_user"])
def test_a_commented_truncate_refused_over_kept_rows_destroys_nothing(request, user, comment):
    db, password = request.getfixturevalue(user)
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # rows another pipeline keeps
    target = _opened_target(db, password, table, data_save_mode="CUSTOM_PROCESSING",
                            custom_sql=f"{comment}TRUNCATE TABLE {table}{' */' if comment.startswith(('/*!', '/*M!')) else ''}")

    def kept(plan):
        raise PermanentError("rows kept in the target")   # the store's answer

    target.decide_save_modes = kept
    # told apart as DDL: refused for LOCK TABLES before anything ran, or, locked, over the kept rows
    expected = (JdbcSinkError, "GRANT LOCK TABLES") if user == "seatunnel_user" else (PermanentError, "rows kept")
    with pytest.raises(expected[0], match=expected[1]):
        target.save_mode_plan(None)
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
