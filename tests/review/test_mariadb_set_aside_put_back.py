"""Review of 4f9f607 (F4, RECREATE_SCHEMA by RENAME TABLE aside on MariaDB). While the table is set
aside (the store's kept-rows check runs), the table's name is free: another job's writer preparing its
next batch (``SaveModeDoor.prepare`` -> ``ensure``, CREATE_SCHEMA_WHEN_NOT_EXIST) makes the table
again and commits into it. The check then refuses over rows kept; ``_undo``'s RENAME back fails on the
table made again, and the failure is suppressed (save_modes.py ``_undo``): the rows that writer (and
any other) committed before are left in ``seatide_aside_*``, gone from the table (promise 1)."""

from __future__ import annotations

import secrets

import pytest

from tests.connectors.test_jdbc_sink_privileges import _admin, _opened_target, _rows, seatunnel_user  # noqa: F401


def test_a_refused_recreate_puts_the_rows_back_even_when_the_table_was_made_again_meanwhile(seatunnel_user):
    from seatide.plugin.base import PermanentError

    db, password = seatunnel_user
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # committed by another job, kept by it
    target = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")

    def kept(plan):
        # meanwhile (the table set aside), the other job's writer prepares its next batch: no table, so
        # its ensure (CREATE_SCHEMA_WHEN_NOT_EXIST) makes it, and it commits batch 3 there
        _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)", f"INSERT INTO {database}.{table} VALUES (3)")
        raise PermanentError("rows kept in the target by another job")   # the store's answer

    target.decide_save_modes = kept
    with pytest.raises(PermanentError, match="rows kept"):
        target.save_mode_plan(None)
    aside = _rows(db, password, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                                "AND table_name LIKE 'seatide_aside%'")
    # nothing destroyed: every committed row is in the table, nothing left aside
    assert (_rows(db, password, f"SELECT id FROM {table} ORDER BY id"), aside) == ([(1,), (2,), (3,)], [])


def test_a_driver_killed_while_its_recreate_has_the_table_aside_leaves_no_committed_row_out_of_it(
        seatunnel_user, monkeypatch):
    """The driver is SIGKILLed while the store's check runs, the table set aside (a killed driver puts
    nothing back). Only a carrier of the same decision looks for it (``_put_back(record)``): another
    job's writer (or a fresh start's scope, or the same config submitted again) finds no table, makes it
    (ensure, CREATE_SCHEMA_WHEN_NOT_EXIST) and writes: the rows committed in the table before stay in
    ``seatide_aside_*``, out of the table, with nothing saying so to that writer."""
    from seatide.connectors.jdbc import save_modes

    db, password = seatunnel_user
    database, table = db[0].rsplit("/", 1)[1], f"t_{secrets.token_hex(3)}"
    _admin(f"CREATE TABLE {database}.{table} (id BIGINT PRIMARY KEY)",
           f"INSERT INTO {database}.{table} VALUES (1), (2)")        # committed, kept by another pipeline
    first = _opened_target(db, password, table, schema_save_mode="RECREATE_SCHEMA")

    def killed(plan):
        raise KeyboardInterrupt("driver SIGKILLed during the store's check")

    first.decide_save_modes = killed
    monkeypatch.setattr(save_modes, "_undo", lambda *args: None)    # a killed driver puts nothing back
    with pytest.raises(KeyboardInterrupt):
        first.save_mode_plan(None)
    monkeypatch.undo()
    other = _opened_target(db, password, table)                     # another job's writer, APPEND_DATA
    other.save_mode_decisions = (f"P_other@{table}",)
    assert other.save_mode_plan(None) is None
    from pyspark.sql import types as T

    other.ensure(T.StructType([T.StructField("id", T.LongType(), False)]))     # no table: it makes one
    _admin(f"INSERT INTO {database}.{table} VALUES (3)")                       # and commits its batch
    assert _rows(db, password, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]
