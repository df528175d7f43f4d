"""Assert sink: SeaTunnel's rule-checking sink (``rules``) for testing jobs.

``rules`` parses and validates the rules block, ``checks`` evaluates a batch with one Spark
aggregation, ``sink`` is the plugin. ``AssertionFailed`` is the error a broken rule raises.
"""

from seatide.connectors.assertion.checks import AssertionFailed

__all__ = ["AssertionFailed"]
