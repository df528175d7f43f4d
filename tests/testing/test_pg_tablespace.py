"""Test databases on the shared server go to the tablespace in memory that scripts/services
makes (seatide/testing/pg_tablespace.py), and a database made there works as any other."""

from __future__ import annotations

import os
import secrets

import psycopg
import pytest

from seatide.store.db import open_store
from seatide.testing.pg_tablespace import SHARED_SERVER, TABLESPACE, in_memory


def test_a_test_database_is_made_in_the_tablespace_in_memory_and_holds_a_store():
    # As root (CI, this machine) scripts/services always makes it; elsewhere it may not be able to
    # (no sudo, a small /dev/shm), and test databases then stay on disk, as they did before.
    if in_memory() == "" and os.geteuid() != 0:
        pytest.skip("no tablespace in memory here (scripts/services needs root or sudo, 1 GiB free in /dev/shm)")
    assert in_memory() == f" TABLESPACE {TABLESPACE}", "scripts/services makes it: run it first"
    name = f"seatide_ts_{secrets.token_hex(4)}"
    with psycopg.connect(SHARED_SERVER, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}{in_memory()}")
        try:
            where = admin.execute("SELECT t.spcname, pg_tablespace_location(t.oid) FROM pg_database d "
                                  "JOIN pg_tablespace t ON t.oid = d.dattablespace WHERE d.datname = %s",
                                  (name,)).fetchone()
            assert where[0] == TABLESPACE and where[1].startswith("/dev/shm/")
            store = open_store(f"postgresql://postgres@127.0.0.1:5432/{name}")
            try:
                with store.read() as conn:
                    assert conn.exec_driver_sql("SELECT count(*) FROM jobs").scalar() == 0
            finally:
                store.dispose()
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
