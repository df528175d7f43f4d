"""FakeSource: deterministic generated rows (SeaTunnel's FakeSource options), made by Spark SQL."""

from seatide.connectors.fake.source import FakeSource

__all__ = ["FakeSource"]
