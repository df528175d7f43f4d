"""Fixtures of the end-to-end tests: jobs run through the real coordinator, worker and driver
code in the test process (tests/e2e/harness.py), on the shared SparkSession."""

from __future__ import annotations

import pytest

from tests.e2e.harness import InProcessCluster


@pytest.fixture
def local(spark, tmp_path):
    return InProcessCluster(spark, str(tmp_path / "data"))


@pytest.fixture
def driver(spark, tmp_path):
    """As ``local``, each attempt run as a driver process runs it: on a thread where the session
    is not active (``InProcessCluster(driver_thread=True)``)."""
    return InProcessCluster(spark, str(tmp_path / "data"), driver_thread=True)
