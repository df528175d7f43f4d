"""Row kinds: every row SeaTide moves carries one, so change streams can flow through.

The kind travels in a hidden column ``__row_kind`` (a tinyint with Flink's byte values).
Sources add it, transforms carry it, sinks that cannot apply a kind refuse it at
validation time (see ``Sink.accepted_row_kinds``), before anything runs.
"""

from __future__ import annotations

import enum

ROW_KIND_COLUMN = "__row_kind"


class RowKind(enum.IntEnum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]

    @classmethod
    def parse(cls, text: str) -> "RowKind":
        """Accepts SeaTunnel's full names (``UPDATE_AFTER``) and short forms (``+U``)."""
        value = str(text).strip().upper()
        for kind in cls:
            if value in (kind.name, kind.short.upper()):
                return kind
        names = ", ".join(k.name for k in cls)
        raise ValueError(f"unknown row kind {text!r} (expected one of {names})")


ALL_KINDS = frozenset(RowKind)
INSERT_ONLY = frozenset({RowKind.INSERT})


def user_columns(columns: list[str]) -> list[str]:
    """The columns a user sees: everything but the hidden row-kind column."""
    return [c for c in columns if c != ROW_KIND_COLUMN]
