"""The fault tests' job files moved to ``seatide.testing.jobs`` (the chaos runner uses them too)."""
from seatide.testing.jobs import *  # noqa: F401,F403
