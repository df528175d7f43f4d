"""Field lookups shared by the transforms: column references and missing-field errors.

A transform only learns its input's fields when ``apply`` runs (schemas may be discovered
at run time), so checks that name input fields happen there, before any row moves. Their
errors name the transform, the option, the field and every field the input does have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from seatide.plugin.base import PermanentError
from seatide.plugin.options import OptionError
from seatide.plugin.rowkind import HIDDEN_COLUMNS, ROW_KIND_COLUMN, user_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class TransformInputError(OptionError, PermanentError):
    """A transform's option does not fit the input it was given (raised at ``apply``).

    Permanent: no retry makes a missing field appear, so the runtime fails at once.
    """


def column(name: str) -> "Column":
    """A reference to a top-level field, even when its name holds dots or backticks."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def row_kind() -> "Column":
    return column(ROW_KIND_COLUMN)


def hidden(df: "DataFrame") -> list["Column"]:
    """The hidden columns ``df`` carries (the row kind, and a change stream's row sequence),
    last and in that order: a transform that selects its output fields selects these too."""
    return [column(name) for name in HIDDEN_COLUMNS if name in df.columns]


def describe_fields(df: "DataFrame") -> str:
    return ", ".join(user_columns(df.columns)) or "none"


def missing_field(plugin: str, option: str, field: str, df: "DataFrame",
                  what: str = "field") -> TransformInputError:
    return TransformInputError(
        option, f"{plugin}: {option} names {what} '{field}', which the input does not have "
        f"(available fields: {describe_fields(df)})")


def require_fields(plugin: str, option: str, fields: Iterable[str], df: "DataFrame") -> None:
    """Raise for the first of ``fields`` the input lacks (the hidden row kind never counts)."""
    present = set(user_columns(df.columns))
    for field in fields:
        if field not in present:
            raise missing_field(plugin, option, field, df)


def put_fields(df: "DataFrame", new: dict[str, "Column"]) -> "DataFrame":
    """Set fields the way SeaTunnel's multi-field transforms do.

    A field that exists keeps its position and gets the new value; a new field is
    appended after the existing ones, in the order given. The hidden columns stay last.
    """
    existing = user_columns(df.columns)
    out = [new[name].alias(name) if name in new else column(name) for name in existing]
    out += [value.alias(name) for name, value in new.items() if name not in existing]
    return df.select(*out, *hidden(df))


def dedupe_check(plugin: str, option: str, names: list[str]) -> None:
    """Two outputs with one name would make an ambiguous row; say which name repeats."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise OptionError(option, f"{plugin}: {option} lists the output field '{name}' "
                              "more than once; give each output a distinct name")
        seen.add(name)
