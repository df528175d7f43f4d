"""Fixtures for control-plane tests: each runs on SQLite and on PostgreSQL (the fault stories on PostgreSQL under `-m soak`)."""

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


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


# The fault stories run whole on SQLite in CI; on PostgreSQL they run with `-m soak`. What is
# store-specific (the lease, liveness locks, crash at every failpoint, the store tests, the
# chaos run's own PostgreSQL) runs on both in CI. Each story on PostgreSQL costs as much as
# on SQLite (Spark start-up dominates): together about 14 minutes of CI time.
SOAK_ON_POSTGRESQL = {"test_failure_stories.py", "test_checkpoints.py", "test_hung_jobs.py",
                      "test_attempt_end.py", "test_seatunnel_api.py", "test_seatunnel_cli.py",
                      "test_operator_reads.py", "test_warm_drivers.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("store_url") == "postgresql" and item.path.name in SOAK_ON_POSTGRESQL:
            item.add_marker(pytest.mark.soak)
