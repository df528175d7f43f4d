"""Filter: keep or drop fields (SeaTunnel's field filter, not a row filter)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import STRING_LIST, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import user_columns
from seatide.transforms.fields import column, dedupe_check, hidden, require_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@register
class Filter(Transform):
    """Keeps the fields in ``include_fields`` (in that order) or drops those in ``exclude_fields``.

    Exactly one of the two is set. To filter rows, use ``Sql`` with a WHERE clause.
    The hidden row kind always passes through.
    """

    plugin_name = "Filter"
    options = (
        Option("include_fields", STRING_LIST, None,
               "fields to keep, in output order; the others are removed", aliases=("fields",)),
        Option("exclude_fields", STRING_LIST, None,
               "fields to remove; the others are kept in input order"),
    )

    def check(self) -> None:
        include, exclude = self.opts.given("include_fields"), self.opts.given("exclude_fields")
        if include == exclude:
            raise self.invalid("include_fields" if include else "exclude_fields",
                               "Filter: set exactly one of include_fields and exclude_fields "
                               f"({'both are' if include else 'neither is'} set)")
        key = "include_fields" if include else "exclude_fields"
        if not self.opts[key]:
            raise self.invalid(key, f"Filter: {key} is empty; list at least one field")
        dedupe_check("Filter", key, self.opts[key])

    def catalog(self, upstream):
        from seatide.plan.catalog import keep_fields

        if self.opts.given("include_fields"):
            keep = self.opts["include_fields"]
        else:
            dropped = set(self.opts["exclude_fields"])
            keep = [c.name for c in upstream.columns if c.name not in dropped]
        return keep_fields(upstream, {name: name for name in keep})

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        if self.opts.given("include_fields"):
            keep = self.opts["include_fields"]
            require_fields("Filter", "include_fields", keep, df)
        else:
            require_fields("Filter", "exclude_fields", self.opts["exclude_fields"], df)
            dropped = set(self.opts["exclude_fields"])
            keep = [name for name in user_columns(df.columns) if name not in dropped]
        return df.select(*[column(name) for name in keep], *hidden(df))
