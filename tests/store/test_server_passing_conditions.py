"""Outside review of b5aba34..HEAD, R2 (continued): a real server's passing conditions, which trying again clears,
are called lasting by ``plugin/server_errors.lasting_fix``, "no outage ... one SeaTide's own: report it"."""

from __future__ import annotations

import pytest


LIMITED = "seatide_review_limited"


def _too_many_connections():
    """A real server's refusal while its connections are taken: trying again once one is free succeeds."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (LIMITED,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {LIMITED} LOGIN CONNECTION LIMIT 1")
    with psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user=LIMITED):
        try:
            psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user=LIMITED).close()
        except psycopg.OperationalError as exc:
            return exc
    raise AssertionError("the second connection was not refused")


def _statement_timeout():
    """The release's 1 s statement timeout on a slow server (coordinator/source_release.py): a later try may pass."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True) as conn:
        conn.execute("SET statement_timeout = 100")
        try:
            conn.execute("SELECT pg_sleep(1)")
        except psycopg.errors.QueryCanceled as exc:
            return exc
    raise AssertionError("not cancelled")


@pytest.mark.parametrize("make", [_too_many_connections, _statement_timeout])
def test_a_passing_server_condition_is_not_called_lasting(make):
    from seatide.plugin.server_errors import lasting_fix

    exc = make()
    fix = lasting_fix(exc)
    assert fix is None or "SeaTide's own" not in fix, f"{type(exc).__name__}: {exc} -> lasting: {fix}"
