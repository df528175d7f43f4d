"""Split: split one string field into several fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import REQUIRED, STRING, STRING_LIST, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.transforms.fields import (TransformInputError, column, dedupe_check, put_fields,
                                       require_fields)
from seatide.transforms.java_regex import jvm_syntax_error, syntax_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@register
class Split(Transform):
    """Splits ``split_field`` at ``separator`` into the string fields ``output_fields``.

    As in SeaTunnel (Java's ``String.split(separator, n)``), the separator is a regular
    expression, the last output field holds the rest of the text, missing parts are NULL
    and a NULL input gives NULLs. New fields are appended; an existing field of the same
    name is overwritten in place. The split field itself is kept.
    """

    plugin_name = "Split"
    options = (
        Option("separator", STRING, REQUIRED, "where to split: a Java regex (\\\\| for a literal |)"),
        Option("split_field", STRING, REQUIRED, "the field to split"),
        Option("output_fields", STRING_LIST, REQUIRED, "names of the fields the parts go to, in order"),
    )

    def check(self) -> None:
        separator, outputs = self.opts["separator"], self.opts["output_fields"]
        if separator == "":
            raise self.invalid("separator", "Split: separator is empty; give the text to split at")
        problem = syntax_error(separator)
        if problem:
            raise self.invalid("separator", f"Split: separator is a regular expression and "
                               f"{separator!r} is not valid ({problem}); escape special "
                               "characters, e.g. \\\\| for |")
        if not outputs:
            raise self.invalid("output_fields", "Split: output_fields is empty; name at least one field")
        dedupe_check("Split", "output_fields", outputs)
        if ROW_KIND_COLUMN in outputs:
            raise self.invalid("output_fields", f"Split: output_fields cannot hold "
                               f"'{ROW_KIND_COLUMN}', a name SeaTide reserves for the row kind")

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        from pyspark.sql import functions as F

        field, outputs = self.opts["split_field"], self.opts["output_fields"]
        require_fields("Split", "split_field", [field], df)
        problem = jvm_syntax_error(df.sparkSession, self.opts["separator"])
        if problem:
            raise TransformInputError("separator", f"Split: separator is not a valid Java "
                                      f"regular expression: {problem}")
        parts = F.split(column(field).cast("string"), F.lit(self.opts["separator"]), len(outputs))
        return put_fields(df, {name: F.get(parts, i) for i, name in enumerate(outputs)})
