"""Fixtures both contract suites (sinks and sources) use."""

from __future__ import annotations

import pytest

from seatide.testing.http_server import LocalHttp
from seatide.testing.redis_server import PrivateRedis


@pytest.fixture(scope="module")
def http_server():
    """A local HTTP server for the Http contexts, one per module."""
    server = LocalHttp()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A private redis-server for the Redis contexts, one per module."""
    server = PrivateRedis(str(tmp_path_factory.mktemp("contract-redis")))
    yield server
    server.stop()
