"""Fixtures for control-plane tests: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy import create_engine, text

from tests.cluster.harness import Cluster

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    name = f"seatide_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture
def cluster(store_url, tmp_path, request):
    c = Cluster(store_url, str(tmp_path / "data"))
    yield c
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(c.logs())
    c.stop_all()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
