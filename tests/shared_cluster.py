"""The module's shared cluster (``shared_cluster``): one coordinator and one worker a module's
tests share when they kill no coordinator or worker (docs/testing.md, "Shared clusters"). A plugin
of the whole suite (tests/conftest.py), as the control-plane tests and the connectors' kill
stories both use it."""

from __future__ import annotations

import pytest

from seatide.testing.cluster import Cluster


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    """One coordinator and one worker, on SQLite, shared by a module's tests that need no
    cluster of their own (as Flink's MiniClusterExtension is shared per test class): each test
    submits its jobs under job ids of its own and reads only those. A test that kills, pauses
    or arms a process, or reads the whole store, starts its own (``cluster``).

    Its drivers start cold, as the ``cluster`` fixture's do: with a warm pool, whether a job
    got a warm driver or a cold one would depend on how soon the pool refilled, and the refill's
    JVM would start beside the next test's job (on a loaded two-core host, in one measured run,
    a warm driver handed a job while still starting took 5.3 min to Spark, a cold one 2.5 min)."""
    tmp = tmp_path_factory.mktemp("module-cluster")
    c = Cluster(f"sqlite:///{tmp}/state.db", str(tmp / "data"))
    try:
        c.coordinator("c1")
        c.worker("w1", slots=2)
        yield c
    finally:
        c.stop_all()


@pytest.fixture
def shared_cluster(module_cluster, request):
    """The module's shared cluster (``module_cluster``); its processes' logs are printed when
    the test fails. The jobs a test left live are ended after it (``end_live_jobs``): the next
    test starts with the worker's slots free."""
    yield module_cluster
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(module_cluster.logs())
    module_cluster.end_live_jobs()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
