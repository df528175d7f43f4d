"""The Jdbc source's partition column: which columns can split a read, and the SQL of a split plan.

SeaTunnel splits by a numeric, date or character column (``partition_column``, or the first
such column of the table's primary key). A character column is compared in its own collation,
or in ``split.string_split_mode_collate``; its cut points come from the database
(``split_measure``), so only character types whose order the database defines as text are
taken: not json, enum or set, nor the types PostgreSQL carries as their text (uuid, inet...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import types as T

from seatide.connectors.jdbc.read_types import ReadColumn, quote
from seatide.connectors.jdbc.split_measure import string_split_sql
from seatide.connectors.jdbc.splits import DATE, NUMBER, STRING, string_literal

_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.FloatType, T.DoubleType)
_CHARACTER = re.compile(r"(character varying|varchar|character|char|bpchar|text|name|tinytext|mediumtext|longtext)"
                        r"(\(\d+\))?", re.IGNORECASE)
SPLITTABLE = "a numeric, date or character (char, varchar, text) column"


def split_kind(column: ReadColumn | None) -> str | None:
    """NUMBER, DATE or STRING: how ``column`` splits a read; None: it cannot."""
    if column is None:
        return None
    if isinstance(column.spark_type, _NUMERIC):
        return NUMBER
    if isinstance(column.spark_type, T.DateType):
        return DATE
    if isinstance(column.spark_type, T.StringType) and column.db_expr is None and _CHARACTER.fullmatch(column.db_type):
        return STRING
    return None


@dataclass(frozen=True)
class Partitioning:
    """How one query is split: by ``column`` (None: one split, the whole query)."""

    dialect: str
    column: ReadColumn | None
    string_mode: str = "sample"
    collate: str | None = None

    @property
    def kind(self) -> str:
        return split_kind(self.column) or NUMBER

    @property
    def quoted(self) -> str | None:
        """The column as the split predicates compare it (in the collation asked for)."""
        if self.column is None:
            return None
        name = quote(self.dialect, self.column.name)
        return f"{name} COLLATE {quote(self.dialect, self.collate)}" if self.collate and self.kind == STRING else name

    def bounded_sql(self, base_sql: str, low, high) -> str:
        """``base_sql`` kept to ``low..high`` of the column (partition_lower_bound / upper_bound)."""
        if self.column is None or (low is None and high is None):
            return base_sql
        literal = {DATE: lambda v: f"DATE '{v}'", STRING: lambda v: string_literal(self.dialect, str(v))}.get(
            self.kind, str)
        limits = ([f"{self.quoted} >= {literal(low)}"] if low is not None else []) + \
                 ([f"{self.quoted} <= {literal(high)}"] if high is not None else [])
        return f"SELECT * FROM ({base_sql}) seatide_b WHERE {' AND '.join(limits)}"

    def plan_sql(self, bounded_sql: str, count: bool = True) -> str:
        rows = "COUNT(*)" if count else "NULL"
        if self.column is None:
            return f"SELECT NULL, NULL, {rows} FROM ({bounded_sql}) seatide_t"
        return f"SELECT MIN({self.quoted}), MAX({self.quoted}), {rows} FROM ({bounded_sql}) seatide_t"

    def spec(self, bounded_sql: str) -> dict:
        """What ``split_measure.measure`` needs besides the plan's SQL and sizes (JSON-able)."""
        strings = None
        if self.column is not None and self.kind == STRING:
            strings = {"mode": self.string_mode, **string_split_sql(self.quoted, bounded_sql)}
        return {"column": self.column.name if self.column else None, "kind": self.kind, "dialect": self.dialect,
                "strings": strings}


__all__ = ["Partitioning", "SPLITTABLE", "split_kind"]
