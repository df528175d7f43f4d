"""Options both CDC sources accept from SeaTunnel and need not act on.

SeaTunnel's CDC connectors size their snapshot chunks by sampling the key's distribution
and pool their connections. SeaTide's snapshot splits follow the key order with exact row
counts and each reader task opens one connection, so these options change nothing; they
are accepted, declared once here, so that job files written for SeaTunnel load unchanged.
"""

from __future__ import annotations

from seatide.plugin.options import FLOAT, INT, Option

_SPLITS = "accepted; snapshot splits follow the key order with exact row counts, so nothing is estimated"

SNAPSHOT_TUNING: tuple[Option, ...] = (
    Option("connection.pool.size", INT, 20, "accepted; each reader task opens one connection, not a pool"),
    Option("chunk-key.even-distribution.factor.upper-bound", FLOAT, 100.0, _SPLITS),
    Option("chunk-key.even-distribution.factor.lower-bound", FLOAT, 0.05, _SPLITS),
    Option("sample-sharding.threshold", INT, 1000, _SPLITS),
    Option("inverse-sampling.rate", INT, 1000, _SPLITS),
)
