"""Review of 4f9f607 (F4): a DDL custom_sql is told apart by ``JdbcSinkSpec.custom_sql_is_ddl``
(spec.py ``_DDL``), which skips leading ``/* */`` comments only. SeaTunnel's usual statement with a
line comment first (``-- empty it`` newline ``TRUNCATE TABLE t``) is taken for DML: it runs before
the kept-rows check, in a "transaction" MariaDB commits at once, and no LOCK TABLES is asked for or
required. The check refuses over rows kept, the rollback undoes nothing: the kept rows are gone
(promise 1; promise 3: not refused before anything is destroyed)."""

from __future__ import annotations

import secrets

import pytest

from tests.connectors.test_jdbc_sink_privileges import _admin, _opened_target, _rows, seatunnel_user  # noqa: F401


@pytest.mark.parametrize("comment", ["-- empty it\n", "# empty it\n"])
def test_a_commented_truncate_refused_over_kept_rows_destroys_nothing(seatunnel_user, comment):
    from seatide.plugin.base import PermanentError

    db, password = seatunnel_user
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # rows another pipeline keeps
    target = _opened_target(db, password, table, data_save_mode="CUSTOM_PROCESSING",
                            custom_sql=f"{comment}TRUNCATE TABLE {table}")

    def kept(plan):
        raise PermanentError("rows kept in the target")   # the store's answer after the step's statement

    target.decide_save_modes = kept
    with pytest.raises(Exception) as refused:
        target.save_mode_plan(None)
    # either refused for LOCK TABLES before anything ran, or refused over kept rows with the rows intact
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)], refused.value
