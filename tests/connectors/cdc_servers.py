"""Private database servers for change-data-capture tests.

CDC needs server settings the shared test databases do not have (PostgreSQL's
``wal_level = logical``), so these fixtures start a throw-away server of their own in a
temporary directory on a free port, once per test session, and stop it at the end even
when tests fail. ``PrivatePostgres`` is also used by ``bench/cdc_latency.py``.
"""

from __future__ import annotations

import pytest

from seatide.testing.servers import PrivatePostgres  # noqa: F401  (bench/cdc_latency.py imports it from here)


@pytest.fixture(scope="session")
def private_postgres():
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()
