"""Outside review of 4f9f607: RECREATE_SCHEMA on MariaDB renamed the table aside for its check. While
aside, the table's name was free: another job's writer made the table again (CREATE_SCHEMA_WHEN_NOT_EXIST)
and committed; refused over kept rows, the rename back failed (suppressed) and the rows committed
before stayed in ``seatide_aside_*``; a driver killed while the table was aside left them there for
every writer but a carrier of the same decision. Now the table is locked (LOCK TABLES) for the check
and the DROP: no writer makes or fills it meanwhile, and a killed driver's lock ends with its
connection, nothing moved. Real MariaDB, a user with SeaTunnel's grants and LOCK TABLES."""

from __future__ import annotations

import secrets

import pytest
from pyspark.sql import types as T

from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import PermanentError
from tests.connectors.test_jdbc_sink_privileges import ADMIN, _admin, _opened_target, _rows, locking_user  # noqa: F401


def test_a_writer_is_held_off_while_a_recreate_checks_and_its_refusal_keeps_every_row(locking_user):
    db, password = locking_user
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # committed by another job, kept by it
    target = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")
    held_off = []

    def kept(plan):
        # meanwhile the other job's writer commits its next batch: it waits on the lock, and gives up
        # after its lock_wait_timeout, having committed nothing
        other = JdbcUrl.parse(ADMIN).connect("root", autocommit=True)
        try:
            other.cursor().execute("SET SESSION lock_wait_timeout = 1")
            other.cursor().execute(f"INSERT INTO {database}.{table} VALUES (3)")
        except Exception as exc:
            held_off.append(exc.args[0])
        finally:
            other.close()
        raise PermanentError("rows kept in the target by another job")   # the store's answer

    target.decide_save_modes = kept
    with pytest.raises(PermanentError, match="rows kept"):
        target.save_mode_plan(None)
    assert held_off == [1205], "the other writer was not held off while the recreate checked"   # ER_LOCK_WAIT_TIMEOUT
    _admin(f"INSERT INTO {database}.{table} VALUES (3)")               # its batch again, now the lock is gone
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]


def test_a_driver_killed_while_its_recreate_checks_leaves_the_table_and_its_rows_for_any_writer(locking_user):
    db, password = locking_user
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # committed, kept by another pipeline
    first = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")

    def killed(plan):
        raise KeyboardInterrupt("driver SIGKILLed during the store's check")

    first.decide_save_modes = killed
    with pytest.raises(KeyboardInterrupt):
        first.save_mode_plan(None)                  # its session ends: the server lets the lock go
    other = _opened_target(db, password, table)                     # another job's writer, APPEND_DATA
    other.save_mode_decisions = (f"P_other@{table}",)
    assert other.save_mode_plan(None) is None
    other.ensure(T.StructType([T.StructField("id", T.LongType(), False)]))     # the table is there
    _admin(f"INSERT INTO {database}.{table} VALUES (3)")                       # and it commits its batch
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]
