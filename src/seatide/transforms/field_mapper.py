"""FieldMapper: choose, order and rename fields in one step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import OBJECT, REQUIRED, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.transforms.fields import column, dedupe_check, hidden, require_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@register
class FieldMapper(Transform):
    """Outputs exactly the fields named in ``field_mapper``, in its order, renamed.

    ``field_mapper = { id = id, name = new_name }`` maps an input field to its output
    name; fields not listed are removed. The hidden row kind always passes through.
    """

    plugin_name = "FieldMapper"
    options = (
        Option("field_mapper", OBJECT, REQUIRED,
               "input field -> output field name; fields not listed are removed"),
    )

    def check(self) -> None:
        mapping = self.opts["field_mapper"]
        if not mapping:
            raise self.invalid("field_mapper", "FieldMapper: field_mapper is empty; map at "
                                               "least one field, e.g. field_mapper { id = id }")
        for source, target in mapping.items():
            if not isinstance(target, str) or not target.strip():
                raise self.invalid("field_mapper", f"FieldMapper: field_mapper.{source} must be "
                                   f"the output field name (a string), got {target!r}")
            if target == ROW_KIND_COLUMN:
                raise self.invalid("field_mapper", f"FieldMapper: '{ROW_KIND_COLUMN}' is reserved "
                                   "for the row kind; map the field to another name")
        dedupe_check("FieldMapper", "field_mapper", list(mapping.values()))

    def catalog(self, upstream):
        from seatide.plan.catalog import keep_fields

        # A renamed key field loses the key: the sink's table is keyed by other names.
        return keep_fields(upstream, {dst: src for src, dst in self.opts["field_mapper"].items()})

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        mapping: dict[str, str] = self.opts["field_mapper"]
        require_fields("FieldMapper", "field_mapper", mapping, df)
        return df.select(*[column(src).alias(dst) for src, dst in mapping.items()], *hidden(df))
