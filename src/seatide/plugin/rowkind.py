"""Row kinds: every row SeaTide moves carries one, so change streams can flow through.

The kind travels in a hidden column ``__row_kind`` (a tinyint with Flink's byte values).
Sources add it, transforms carry it, sinks that cannot apply a kind refuse it at
validation time (see ``Sink.accepted_row_kinds``), before anything runs.

A change stream also carries each row's place in the source's order in a hidden column
``__row_seq`` (a bigint, increasing in commit order within a batch). A sink that keeps the
last change per key picks it by this number, not by the order rows reach it in, which any
transform that moves rows between partitions (ORDER BY, a REPARTITION hint, a join) changes.
A source that streams changes writes it into its own rows (the CDC sources: Spark refuses to
number a stream's rows), increasing in commit order among one table's rows of a micro-batch;
the runtime numbers the other change sources' frames (``seatide.runtime.change_order``).
Transforms carry it as they carry the kind, and only sinks that apply changes in order see it.
"""

from __future__ import annotations

import enum

ROW_KIND_COLUMN = "__row_kind"
ROW_SEQ_COLUMN = "__row_seq"
HIDDEN_COLUMNS = (ROW_KIND_COLUMN, ROW_SEQ_COLUMN)
# A source that reads one batch in several partitions (the CDC sources' snapshot splits) numbers
# the n-th partition's rows from n times this: the batch stays ordered across its partitions
# (no partition holds 2^40 rows).
PARTITION_SEQ_STRIDE = 1 << 40


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


def hidden_fields(sequenced: bool = False) -> list:
    """The hidden fields a source's Spark schema ends with: the row kind, then the row sequence
    when the source writes it itself (``sequenced``)."""
    from pyspark.sql import types as T

    kind = T.StructField(ROW_KIND_COLUMN, T.ByteType(), True)
    return [kind, T.StructField(ROW_SEQ_COLUMN, T.LongType(), True)] if sequenced else [kind]


def user_columns(columns: list[str]) -> list[str]:
    """The columns a user sees: everything but the hidden row kind and row sequence."""
    return [c for c in columns if c not in HIDDEN_COLUMNS]
