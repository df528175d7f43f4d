"""Shared fixtures: one SparkSession for the whole run (it costs ~7 s to start)."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy import create_engine, text

from seatide.testing.cluster import mark_owner

# The suite runs in several pytest processes (pytest-xdist) that reuse job ids: each counts
# only the driver processes it started itself.
mark_owner()

# Private database servers with logical decoding / binlog on, started once per run when a
# test asks for them (change data capture).
pytest_plugins = ["tests.connectors.cdc_servers", "tests.connectors.cdc_mysql_server"]


@pytest.fixture(scope="session")
def spark():
    from seatide.runtime.session import build_session

    session = build_session("seatide-tests", {"spark.master": "local[2]"})
    yield session
    session.stop()


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "seatide"
    path.mkdir()
    return str(path)


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
