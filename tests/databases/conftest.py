"""Database job tests run real processes like the cluster tests, with the same fixtures."""

from tests.cluster.conftest import cluster, pytest_runtest_makereport  # noqa: F401
