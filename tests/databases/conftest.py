"""Database job tests run real processes like the cluster tests, with the same fixtures."""

from tests.cluster.conftest import cluster  # noqa: F401  (the report hook is tests/shared_cluster.py's)
