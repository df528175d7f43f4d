"""Split planning for the Jdbc source: value ranges of one column, fixed once.

A ``SplitPlan`` cuts ``[lower, upper]`` of the partition column into ``count`` ranges
of (nearly) equal width. Split ``i`` is ``bound(i) <= col < bound(i + 1)``; the last
split also takes ``upper`` itself and the first one takes the rows whose column is NULL,
so the splits cover every row of the range exactly once. Dates are planned as day
numbers, so one piece of arithmetic serves both kinds.

A string column is cut at values the database chose or ordered (``cuts``, see
``split_measure``): split ``i`` is ``cuts[i - 1] <= col < cuts[i]``, the first split open
below (and holding the NULLs), the last open above. Cut points in ascending order partition
every value once under any collation the comparisons use, so no arithmetic on strings has
to agree with the database's order.

The plan is a pure value (``to_json`` / ``from_json``): the checkpointed reader puts it
in the offsets Spark logs, so a restarted stream uses the plan of the first start even
when the table has grown since.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict, dataclass

NUMBER, DATE, STRING = "number", "date", "string"
_PRINTABLE = (32, 127)       # charset_based: characters in ASCII 32..126, as SeaTunnel assumes
_CHARSET_LENGTH = 32         # characters of a computed cut point at most
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class SplitPlan:
    column: str | None     # None: one split, the whole query
    kind: str              # NUMBER or DATE
    lower: int             # inclusive (a day number for DATE)
    upper: int             # inclusive
    count: int             # number of splits; 0 when the query had no rows to plan over
    rows: int              # rows the query held when planned (to size micro-batches)
    cuts: tuple[str, ...] = ()    # STRING: where splits 1..count-1 begin, ascending in the column's order
    dialect: str = ""             # STRING: how the cuts are written as SQL literals (url.MYSQL or not)

    def bound(self, index: int) -> int:
        """Where split ``index`` starts; ``bound(count)`` is one past ``upper``."""
        width = self.upper - self.lower + 1
        return self.lower + (width * index) // self.count

    def rows_between(self, first: int, stop: int) -> int:
        """Rows (as planned) of splits ``first..stop-1``: the plan's rows spread evenly, rounded so
        that the splits together hold exactly ``rows`` (a whole split's ceiling would count 124
        splits of a 1M-row table as 1,000,060 rows, and push the last one to a batch of its own)."""
        if not self.count:
            return 0
        return self.rows * stop // self.count - self.rows * first // self.count

    def splits_within(self, first: int, max_rows: int) -> int:
        """Where a batch from split ``first`` holding at most ``max_rows`` (planned) rows stops: as
        many whole splits as fit, and at least one."""
        if not self.rows:
            return self.count
        # the largest stop with rows * stop // count <= max_rows + rows * first // count
        fits = ((max_rows + self.rows * first // self.count + 1) * self.count - 1) // self.rows
        return max(first + 1, min(self.count, fits))

    def condition(self, first: int, stop: int, quoted_column: str) -> str:
        """The SQL predicate selecting splits ``first..stop-1`` (empty when there is no column).

        Neighbouring splits are one contiguous range, so a Spark task reads several with one query.
        """
        if self.column is None:
            return ""
        if self.kind == STRING:
            low = self.cuts[first - 1] if first > 0 else None
            high = self.cuts[stop - 1] if stop < self.count else None
            parts = ([f"{quoted_column} >= {string_literal(self.dialect, low)}"] if low is not None else []) + \
                    ([f"{quoted_column} < {string_literal(self.dialect, high)}"] if high is not None else [])
        else:
            low, high = self.bound(first), self.bound(stop)
            parts = [f"{quoted_column} >= {self.literal(low)}", f"{quoted_column} < {self.literal(high)}"]
        text = " AND ".join(parts)
        if first == 0 and text:
            text = f"({text}) OR {quoted_column} IS NULL"
        return text

    def literal(self, value: int) -> str:
        if self.kind == DATE:
            return f"DATE '{day_to_date(value).isoformat()}'"
        return str(value)

    def spark_bounds(self) -> tuple[str, str]:
        """lowerBound / upperBound for Spark's JDBC reader (dates as ISO text)."""
        if self.kind == DATE:
            return day_to_date(self.lower).isoformat(), day_to_date(self.upper + 1).isoformat()
        return str(self.lower), str(self.upper + 1)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "SplitPlan":
        return cls(**{**data, "cuts": tuple(data.get("cuts", ()))})


def string_literal(dialect: str, text: str) -> str:
    """``text`` as a SQL string literal; MySQL reads a backslash as an escape."""
    from seatide.connectors.jdbc.url import MYSQL

    quoted = text.replace("'", "''")
    return "'" + (quoted.replace("\\", "\\\\") if dialect == MYSQL else quoted) + "'"


def charset_cuts(lower: str, upper: str, count: int) -> list[str]:
    """``count - 1`` strings evenly between ``lower`` and ``upper``, read as numbers whose digits
    are the printable ASCII characters (SeaTunnel's charset_based mode). Their order in the
    database's collation may differ: the caller has the database order them."""
    base, first = _PRINTABLE[1] - _PRINTABLE[0], _PRINTABLE[0]
    width = min(_CHARSET_LENGTH, max(len(lower), len(upper), 1))

    def number(text: str) -> int:
        digits = [min(max(ord(c) - first, 0), base - 1) for c in text[:width]] + [0] * (width - len(text[:width]))
        value = 0
        for digit in digits:
            value = value * base + digit
        return value

    def text(value: int) -> str:
        chars = []
        for _ in range(width):
            value, digit = divmod(value, base)
            chars.append(chr(first + digit))
        return "".join(reversed(chars)).rstrip(" ")

    low, high = number(lower), number(upper)
    if high < low:
        low, high = high, low
    return [text(low + (high - low) * i // count) for i in range(1, count)]


def split_count(rows: int, split_size: int, partition_num: int | None) -> int:
    """``partition_num`` splits, or enough of ``split_size`` rows."""
    return partition_num if partition_num else max(1, math.ceil(rows / split_size))


def date_to_day(value: dt.date) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    return (value - _EPOCH).days


def day_to_date(day: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=day)


def as_bound(kind: str, value, *, upper: bool) -> int:
    """A column value (or an option's bound) as a whole number the plan can cut."""
    if kind == DATE:
        if isinstance(value, str):
            value = dt.date.fromisoformat(value.strip()[:10])
        return date_to_day(value)
    number = float(value) if not isinstance(value, int) else value
    # Fractional numeric columns are cut at whole numbers that still enclose every value.
    return math.ceil(number) if upper else math.floor(number)


def plan_splits(column: str | None, kind: str, lower, upper, rows: int, *,
                split_size: int, partition_num: int | None) -> SplitPlan:
    """Cut ``[lower, upper]`` into ``partition_num`` splits, or into splits of about ``split_size`` rows."""
    if column is None or lower is None or upper is None:
        return SplitPlan(None, NUMBER, 0, 0, 1 if rows else 0, rows)
    low, high = as_bound(kind, lower, upper=False), as_bound(kind, upper, upper=True)
    if high < low:
        return SplitPlan(column, kind, low, low, 0, 0)
    count = max(1, min(split_count(rows, split_size, partition_num), high - low + 1))   # never an empty-width split
    return SplitPlan(column, kind, low, high, count, rows)


def string_plan(column: str, cuts: list[str], rows: int | None, dialect: str) -> SplitPlan:
    """The plan of a string column cut at ``cuts`` (ascending, distinct, in the column's order);
    ``rows`` None: not counted (the parallel read)."""
    return SplitPlan(column, STRING, 0, 0, 0 if rows == 0 else len(cuts) + 1, rows or 0, tuple(cuts), dialect)


__all__ = ["DATE", "NUMBER", "STRING", "SplitPlan", "as_bound", "charset_cuts", "date_to_day", "day_to_date",
           "plan_splits", "split_count", "string_literal", "string_plan"]
