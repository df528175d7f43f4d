"""Fixtures both contract suites (sinks and sources) use."""

from __future__ import annotations

import pytest

from seatide.testing.http_server import LocalHttp


@pytest.fixture(scope="module")
def http_server():
    """A local HTTP server for the Http contexts, one per module."""
    server = LocalHttp()
    yield server
    server.stop()
