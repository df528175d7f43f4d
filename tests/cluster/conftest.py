"""Fixtures for control-plane tests: each runs on SQLite and on PostgreSQL (the store_url fixture's two params) unless it names one store (tests/stores.py)."""

from __future__ import annotations

import pytest

from seatide.testing.cluster import Cluster


@pytest.fixture
def cluster(store_url, tmp_path, request):
    c = Cluster(store_url, str(tmp_path / "data"))
    yield c
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(c.logs())
    c.stop_all()
