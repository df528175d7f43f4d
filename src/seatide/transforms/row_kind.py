"""FilterRowKind and RowKindExtractor: act on the hidden row kind of change streams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import STRING, STRING_LIST, Option, enum
from seatide.plugin.registry import register
from seatide.plugin.rowkind import INSERT_ONLY, ROW_KIND_COLUMN, ROW_SEQ_COLUMN, RowKind, user_columns
from seatide.transforms.fields import TransformInputError, column, row_kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def _parse_kinds(plugin: Transform, key: str) -> frozenset[RowKind]:
    kinds = set()
    for text in plugin.opts[key]:
        try:
            kinds.add(RowKind.parse(text))
        except ValueError as exc:
            raise plugin.invalid(key, f"FilterRowKind: {key}: {exc}") from None
    if not kinds:
        raise plugin.invalid(key, f"FilterRowKind: {key} is empty; list row kinds such as [DELETE]")
    return frozenset(kinds)


@register
class FilterRowKind(Transform):
    """Keeps rows whose kind is in ``include_kinds``, or drops those in ``exclude_kinds``.

    Kinds are INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE (or +I, -U, +U, -D); exactly
    one of the two options is set. Validation knows the narrowed kinds, so a sink that
    only takes inserts accepts a stream filtered to INSERT.
    """

    plugin_name = "FilterRowKind"
    options = (
        Option("include_kinds", STRING_LIST, None, "row kinds to keep; the others are dropped"),
        Option("exclude_kinds", STRING_LIST, None, "row kinds to drop; the others are kept"),
    )

    def check(self) -> None:
        include, exclude = self.opts.given("include_kinds"), self.opts.given("exclude_kinds")
        if include == exclude:
            raise self.invalid("include_kinds" if include else "exclude_kinds",
                               "FilterRowKind: set exactly one of include_kinds and exclude_kinds "
                               f"({'both are' if include else 'neither is'} set)")
        key = "include_kinds" if include else "exclude_kinds"
        chosen = _parse_kinds(self, key)
        self._kept = chosen if include else frozenset(RowKind) - chosen

    def row_kinds(self, upstream: frozenset[RowKind]) -> frozenset[RowKind]:
        return upstream & self._kept

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        return df.where(row_kind().isin([int(k) for k in sorted(self._kept)]))


_NAMES = {"SHORT": [k.short for k in RowKind], "FULL": [k.name for k in RowKind]}


@register
class RowKindExtractor(Transform):
    """Turns a change stream into an append-only one that records each row's kind.

    Adds the field ``custom_field_name`` holding the kind (``SHORT``: +I, -U, +U, -D;
    ``FULL``: INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE) and makes every row an INSERT.
    """

    plugin_name = "RowKindExtractor"
    options = (
        Option("custom_field_name", STRING, "row_kind", "name of the field that receives the kind"),
        Option("transform_type", enum("SHORT", "FULL"), "SHORT",
               "SHORT writes +I/-U/+U/-D, FULL writes INSERT/UPDATE_BEFORE/UPDATE_AFTER/DELETE"),
    )

    def check(self) -> None:
        name = self.opts["custom_field_name"]
        if not name.strip() or name == ROW_KIND_COLUMN:
            raise self.invalid("custom_field_name", "RowKindExtractor: custom_field_name must be "
                               f"a field name other than '{ROW_KIND_COLUMN}' (got {name!r})")

    def row_kinds(self, upstream: frozenset[RowKind]) -> frozenset[RowKind]:
        return INSERT_ONLY

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        from pyspark.sql import functions as F

        name = self.opts["custom_field_name"]
        if name in df.columns:
            raise TransformInputError("custom_field_name", f"RowKindExtractor: the input already "
                                      f"has a field '{name}'; set custom_field_name to a new name")
        names = F.array(*[F.lit(text) for text in _NAMES[self.opts["transform_type"]]])
        kind_text = F.element_at(names, row_kind().cast("int") + 1)
        # the rows become inserts, still in source order: a keyed sink keeps the last per key
        sequence = [column(ROW_SEQ_COLUMN)] if ROW_SEQ_COLUMN in df.columns else []
        return df.select(*[column(c) for c in user_columns(df.columns)], kind_text.alias(name),
                         F.lit(int(RowKind.INSERT)).cast("tinyint").alias(ROW_KIND_COLUMN), *sequence)
