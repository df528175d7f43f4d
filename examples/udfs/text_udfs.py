"""Python functions used as SQL functions by examples/sql_with_python_udfs.conf.

``mask`` takes plain values, so it runs once per row (NULL arrives as None) and its result
type comes from its return annotation. ``with_tax`` takes and returns pandas Series, so it
runs vectorised over Arrow batches; the job declares its result type (``returns``).
"""

from __future__ import annotations

import pandas as pd


def mask(name: str) -> str:
    if name is None:
        return None
    return name[0] + "*" * (len(name) - 1)


def with_tax(price: pd.Series, rate: pd.Series) -> pd.Series:
    return (price * (1 + rate)).round(2)
