"""Copy: copy fields into new (or existing) fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seatide.plugin.base import Transform, TransformContext
from seatide.plugin.options import OBJECT, STRING, Option
from seatide.plugin.registry import register
from seatide.plugin.rowkind import ROW_KIND_COLUMN
from seatide.transforms.fields import column, put_fields, require_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@register
class Copy(Transform):
    """Copies fields: ``fields { name_copy = name }`` maps each new field to its source.

    New fields are appended after the input's fields; a destination that already exists
    is overwritten in place (as SeaTunnel does). The deprecated single-field form
    ``src_field`` + ``dest_field`` is accepted; ``fields`` wins when both are set.
    """

    plugin_name = "Copy"
    options = (
        Option("fields", OBJECT, None, "new field -> the field it copies"),
        Option("src_field", STRING, None, "deprecated: the field to copy (use fields)"),
        Option("dest_field", STRING, None, "deprecated: the field to copy src_field into"),
    )

    def check(self) -> None:
        if self.opts.given("fields"):
            self._check_fields(self.opts["fields"])
            return
        src, dest = self.opts["src_field"], self.opts["dest_field"]
        if src is None and dest is None:
            raise self.invalid("fields", "Copy: set fields { new_field = source_field } "
                                         "(or the deprecated src_field and dest_field)")
        if src is None or dest is None:
            missing = "src_field" if src is None else "dest_field"
            raise self.invalid(missing, f"Copy: {missing} is missing; src_field and dest_field "
                               "go together (or use fields { new_field = source_field })")
        self._check_fields({dest: src}, option="dest_field")

    def _check_fields(self, fields: dict, option: str = "fields") -> None:
        if not fields:
            raise self.invalid("fields", "Copy: fields is empty; write fields { new_field = source_field }")
        for dest, src in fields.items():
            if not isinstance(src, str) or not src.strip():
                raise self.invalid("fields", f"Copy: fields.{dest} must name the source field "
                                   f"(a string), got {src!r}")
            if dest == ROW_KIND_COLUMN:
                raise self.invalid(option, f"Copy: '{ROW_KIND_COLUMN}' is reserved for the row "
                                   "kind; copy into another field")

    def copies(self) -> dict[str, str]:
        """New field -> source field, in the order written."""
        if self.opts.given("fields"):
            return dict(self.opts["fields"])
        return {self.opts["dest_field"]: self.opts["src_field"]}

    def apply(self, df: "DataFrame", ctx: TransformContext) -> "DataFrame":
        option = "fields" if self.opts.given("fields") else "src_field"
        copies = self.copies()
        require_fields("Copy", option, copies.values(), df)
        return put_fields(df, {dest: column(src) for dest, src in copies.items()})
