"""Shared fixtures: one SparkSession for the whole run (it costs ~7 s to start)."""

from __future__ import annotations

import json
import os
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



# Seconds each test took in a full run (those over 15 s; measured with the suite in two
# processes on the 2-core machine): only their order depends on it, so it may go stale.
DURATIONS = os.path.join(os.path.dirname(__file__), "durations.json")


def pytest_collection_modifyitems(config, items):
    """Order for pytest-xdist's worksteal, which gives each process one contiguous half of
    this list and lets an idle one steal from the end of the other's. The long tests go to
    the front of the halves, longest first, each to the half with less so far; what is left
    to steal at the end is short tests, and no process ends the run alone with a long one
    (the fault tests had gathered at the end: a tail of 10 minutes on one core)."""
    with open(DURATIONS) as handle:
        known = json.load(handle)

    def seconds(item) -> float:        # a new test that starts processes counts as a minute
        return known.get(item.nodeid, 60 if item.get_closest_marker("cluster") else 0)

    halves: tuple[list, list] = ([], [])
    totals = [0.0, 0.0]
    for item in sorted(items, key=seconds, reverse=True):   # stable: short ones keep their order
        half = 0 if totals[0] <= totals[1] else 1
        halves[half].append(item)
        totals[half] += seconds(item) or 0.5
    items[:] = halves[0] + halves[1]
