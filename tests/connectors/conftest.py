"""Fixtures shared by the connector tests. The Iceberg REST catalog server is one process for the
whole session (each test takes a warehouse of its own), so it is declared here, once."""

from tests.connectors.iceberg_helpers import iceberg_rest_server

__all__ = ["iceberg_rest_server"]
