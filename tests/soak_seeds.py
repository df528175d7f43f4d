"""The seeds of the long randomized checks (``-m soak``).

Each check keeps its own default seeds; ``SEATIDE_SOAK_SEEDS=101,102`` runs every soak check on
those seeds instead, so a soak run can go where no earlier run went (issue 30 asks for seeds
nobody used before) without editing the tests.
"""

from __future__ import annotations

import os


def soak_seeds(*defaults: int) -> list[int]:
    """The seeds named in ``SEATIDE_SOAK_SEEDS``, or ``defaults``."""
    named = os.environ.get("SEATIDE_SOAK_SEEDS", "").strip()
    if not named:
        return list(defaults)
    try:
        return [int(s) for s in named.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"SEATIDE_SOAK_SEEDS={named!r}: give whole numbers separated by commas, "
                         f"e.g. SEATIDE_SOAK_SEEDS=101,102") from None
