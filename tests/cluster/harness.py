"""The process cluster moved to ``seatide.testing.cluster`` (the chaos runner uses it too)."""
from seatide.testing.cluster import *  # noqa: F401,F403
