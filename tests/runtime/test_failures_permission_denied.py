"""A server's "permission denied" (SQLSTATE 42501) carried by the Python client (psycopg) is permanent:
every retry is refused the same way until someone grants it (outside review #2: a multi-table sink's
CREATE TABLE seatide_sink_commits refused in public was retried forever). Real PostgreSQL."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from seatide.runtime.failures import describe_error


def test_a_permission_denied_from_postgresql_is_not_retried():
    role = f"st_denied_{secrets.token_hex(3)}"
    admin = psycopg.connect("host=127.0.0.1 dbname=test user=postgres", autocommit=True)
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    try:
        admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}")
        with psycopg.connect(f"host=127.0.0.1 dbname=test user={role} password=pw") as conn:
            with pytest.raises(psycopg.Error) as refused:
                conn.execute("CREATE TABLE public.st_denied (id int)")
        assert refused.value.sqlstate == "42501"
        error, permanent = describe_error(refused.value)
        assert permanent, error
    finally:
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()
