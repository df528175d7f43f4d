"""The sink's ``query`` option: a user's ``INSERT ... VALUES (?, ...)``, run set-wise over a staged batch.

SeaTunnel binds the fields of each row, in order, to the statement's ``?`` markers and runs
it row by row. SeaTide stages the batch like any other and turns the statement into one
``INSERT ... SELECT`` over the staged rows, the ``n``-th ``?`` becoming the ``n``-th
field, so the user's rows land in the same database transaction as the batch's commit
record. That works for any statement whose row values are one ``VALUES (...)`` tuple
(expressions such as ``upper(?)`` and trailing ``ON CONFLICT`` / ``ON DUPLICATE KEY``
clauses included); other statements (UPDATE, DELETE, several tuples) are refused when the
job is validated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VALUES = re.compile(r"\bvalues\s*\(", re.IGNORECASE)


class QueryError(ValueError):
    """A ``query`` SeaTide cannot run exactly once; the message says which form works."""


@dataclass(frozen=True)
class InsertQuery:
    head: str          # INSERT INTO t (a, b)
    row: list[str]     # the VALUES tuple, split around each ?: len(row) == markers + 1
    tail: str          # what follows the tuple (ON CONFLICT ...)

    @property
    def markers(self) -> int:
        return len(self.row) - 1

    def over(self, columns: list[str], source: str, where: str) -> str:
        """The statement as ``INSERT ... SELECT <row with ? -> columns> FROM source WHERE where``."""
        if len(columns) != self.markers:
            raise QueryError(f"query has {self.markers} ? placeholders but the input has {len(columns)} "
                             f"fields ({', '.join(columns)}); write one ? per field, in field order")
        values = self.row[0] + "".join(col + part for col, part in zip(columns, self.row[1:]))
        return f"{self.head} SELECT {values} FROM {source} WHERE {where}{self.tail}"


    def marker_columns(self) -> tuple[str, dict[int, str]] | None:
        """The target table and, for each ``?`` that is a whole VALUES item, the column it fills
        (by its position in the column list): ``INSERT INTO t (a, b) VALUES (?, upper(?))`` ->
        ``("t", {0: "a"})``. None when the statement names no columns."""
        match = _TARGET.match(self.head)
        if match is None:
            return None
        columns = [c.strip() for c in _split_top_level(match.group("columns"))]
        items = _split_top_level("?".join(self.row))
        filled, marker = {}, 0
        for position, item in enumerate(items):
            if item.strip() == "?" and position < len(columns):
                filled[marker] = columns[position]
            marker += _markers(item)
        return match.group("table").strip(), filled


_TARGET = re.compile(r"\s*insert\s+into\s+(?P<table>.+?)\s*\((?P<columns>.*)\)\s*$", re.IGNORECASE | re.DOTALL)


def _split_top_level(text: str) -> list[str]:
    """``text`` cut at the commas outside parentheses, quotes and identifiers."""
    spans, items, depth, start = _code_spans(text), [], 0, 0
    for i, ch in enumerate(text):
        if not _in_code(i, spans):
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def _markers(text: str) -> int:
    spans = _code_spans(text)
    return sum(1 for i, ch in enumerate(text) if ch == "?" and _in_code(i, spans))


def parse_insert(text: str) -> InsertQuery:
    sql = text.strip().rstrip(";").strip()
    if not re.match(r"insert\s+into\b", sql, re.IGNORECASE):
        raise QueryError("SeaTide runs only INSERT INTO ... VALUES (?, ...) statements exactly once "
                         f"(got: {sql[:60]!r}); use table and primary_keys for upserts and deletes")
    spans = _code_spans(sql)
    match = next((m for m in _VALUES.finditer(sql) if _in_code(m.start(), spans)), None)
    if match is None:
        raise QueryError("query must be INSERT INTO table (fields) VALUES (?, ...) with one ? per field")
    start = match.end()            # just after '('
    depth, end, row, last = 1, None, [], start
    for i in range(start, len(sql)):
        if not _in_code(i, spans):
            continue
        ch = sql[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
        elif ch == "?":
            row.append(sql[last:i])
            last = i + 1
    if end is None:
        raise QueryError("query: the VALUES tuple has no closing parenthesis")
    row.append(sql[last:end])
    tail = sql[end + 1:]
    if re.match(r"\s*,\s*\(", tail):
        raise QueryError("query: write a single VALUES tuple; each input row fills it once")
    return InsertQuery(head=sql[:match.start()].rstrip(), row=row, tail=tail)


def _code_spans(sql: str) -> list[tuple[int, int]]:
    """Ranges of ``sql`` outside quoted strings and identifiers (where a ? is a marker)."""
    spans, start, quote, i = [], 0, None, 0
    while i < len(sql):
        ch = sql[i]
        if quote is None and ch in "'\"`":
            spans.append((start, i))
            quote = ch
        elif quote is not None and ch == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:   # doubled quote inside a literal
                i += 1
            else:
                quote = None
                start = i + 1
        i += 1
    if quote is None:
        spans.append((start, len(sql)))
    return spans


def _in_code(index: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= index < b for a, b in spans)


__all__ = ["InsertQuery", "QueryError", "parse_insert"]
