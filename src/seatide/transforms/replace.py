"""Replace: replace text in one string field, literally or by a Java regex."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import BOOL, REQUIRED, STRING, Option
from seatide.plugin.registry import register
from seatide.transforms.fields import TransformInputError, column, put_fields, require_fields
from seatide.transforms.java_regex import first_match_regex, jvm_syntax_error, syntax_error

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@register
class Replace(Transform):
    """Replaces ``pattern`` with ``replacement`` in the field ``replace_field``, in place.

    Literal by default (every occurrence); with ``is_regex = true`` the pattern is a Java
    regex and the replacement may use ``$1`` / ``${name}``, and ``replace_first = true``
    replaces only the first match (it is ignored without ``is_regex``, as in SeaTunnel).
    A non-string field is replaced on its text form and becomes a string; NULL stays NULL.
    """

    plugin_name = "Replace"
    options = (
        Option("replace_field", STRING, REQUIRED, "the field whose text is replaced"),
        Option("pattern", STRING, REQUIRED, "the text (or, with is_regex, the Java regex) to replace"),
        Option("replacement", STRING, REQUIRED, "the replacement text ($1 refers to a regex group)"),
        Option("is_regex", BOOL, False, "treat pattern as a Java regular expression"),
        Option("replace_first", BOOL, False, "with is_regex, replace only the first match"),
    )

    def check(self) -> None:
        pattern = self.opts["pattern"]
        if pattern == "":
            raise self.invalid("pattern", "Replace: pattern is empty; give the text to replace")
        if self.opts["is_regex"]:
            problem = syntax_error(pattern)
            if problem:
                raise self.invalid("pattern", f"Replace: pattern is not a valid regular "
                                   f"expression ({problem}): {pattern!r}")

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        field = self.opts["replace_field"]
        require_fields("Replace", "replace_field", [field], df)
        if self.opts["is_regex"]:
            problem = jvm_syntax_error(df.sparkSession, self.opts["pattern"])
            if problem:
                raise TransformInputError("pattern", f"Replace: pattern is not a valid Java "
                                          f"regular expression: {problem}")
        return put_fields(df, {field: self._replaced(column(field).cast("string"))})

    def _replaced(self, text: "Column") -> "Column":
        from pyspark.sql import functions as F

        pattern, replacement = self.opts["pattern"], self.opts["replacement"]
        if not self.opts["is_regex"]:
            return F.replace(text, F.lit(pattern), F.lit(replacement))
        if self.opts["replace_first"]:
            pattern, replacement = first_match_regex(pattern, replacement)
        return F.regexp_replace(text, F.lit(pattern), F.lit(replacement))
