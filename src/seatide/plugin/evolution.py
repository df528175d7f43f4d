"""Schema evolution: how a CDC source's table changes reach its sinks (docs/design/multi-table.md).

A CDC source reads each table with the columns the table had when the query started (its
*shape*: a Spark StructType whose fields carry the column's id, where the database has one,
and whether the column was dropped: a *retired* column, kept so that rows read from before the
change still carry its values). When the stream reaches rows of another shape (a column added,
dropped, renamed or retyped), the reader stops the query with ``SCHEMA_CHANGED_MARK``; the
runtime starts it again with the tables' new shapes, derives the changes from the shapes it ran
with before (kept beside the pipeline's checkpoint) and hands them to every sink's targets
(``plugin.sink_protocol.Target.evolve``) before any row of the new shape is written. Applying a
change looks at the target first (is the column there already?), so a change applied before a
crash is not applied twice after it.

What a target does with a change is the behaviour's (Flink CDC 3's names):

* ``exception``: any change fails the job, naming it;
* ``evolve``: every change is applied to the target; a change the target refuses fails the job
  with the statement it refused;
* ``try_evolve``: as evolve, but a refused change is logged and the job goes on as ``lenient``
  would for it;
* ``lenient`` (the default): added columns are added, widened types widened; a dropped column
  stays in the target (rows after the drop leave it null), a renamed one gets a new column beside
  the old one (older rows keep their values in the old);
* ``ignore``: the target keeps its shape; values of columns it does not have are dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructField, StructType

BEHAVIOURS = ("exception", "evolve", "try_evolve", "lenient", "ignore")
DEFAULT_BEHAVIOUR = "lenient"
# Field metadata: the column's identity in its database (PostgreSQL's attnum), and "retired": the
# column was dropped, and is kept only for rows read from before the drop.
COLUMN_ID = "seatide.column_id"
RETIRED = "seatide.retired"
# Put in front of the message a reader raises when the stream reaches rows of another shape; the
# runtime restarts the query with the tables' new shapes instead of failing.
SCHEMA_CHANGED_MARK = "[seatide:schema-changed] "

ADD, DROP, RENAME, RETYPE = "add column", "drop column", "rename column", "change column type"


class SchemaChanged(RuntimeError):
    """Raised by a reader (planning a batch, or in Spark's Python workers): a captured table has
    another shape from here on. ``seen`` is what the stream says of it (the source's own form,
    e.g. pgoutput's columns), for the source to take up when the query starts again."""

    def __init__(self, table: str, seen: object = None):
        payload = json.dumps({"table": table, "seen": seen})
        super().__init__(f"{SCHEMA_CHANGED_MARK}{payload} (the table's columns changed: the query starts "
                         "again with them)")


def schema_change_in(text: str) -> dict | None:
    """The payload of a ``SchemaChanged`` somewhere in ``text`` (Spark wraps a reader's error in its
    own), or None: {"table": name, "seen": ...}."""
    at = text.find(SCHEMA_CHANGED_MARK)
    if at < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text, at + len(SCHEMA_CHANGED_MARK))[0]
    except ValueError:
        return None


@dataclass(frozen=True)
class TableChange:
    """One change of one table's columns, as a sink applies it."""

    table: str                           # the source table's full name
    kind: str                            # ADD, DROP, RENAME or RETYPE
    column: str                          # the column (for RENAME: its old name)
    field_json: str | None = None        # ADD, RETYPE, RENAME: the column as it is now (StructField JSON)
    new_name: str | None = None          # RENAME
    old_json: str | None = None          # RETYPE: the column as it was

    @property
    def old_field(self) -> "StructField":
        from pyspark.sql.types import StructField

        return StructField.fromJson(json.loads(self.old_json))

    def widens(self) -> bool:
        """A RETYPE whose new type holds every value of the old one."""
        return widens(self.old_field, self.field)

    @property
    def field(self) -> "StructField":
        from pyspark.sql.types import StructField

        return StructField.fromJson(json.loads(self.field_json))

    def describe(self) -> str:
        if self.kind == RENAME:
            return f"{self.table}: {self.kind} {self.column} to {self.new_name}"
        if self.kind in (ADD, RETYPE):
            return f"{self.table}: {self.kind} {self.column} {self.field.dataType.simpleString()}"
        return f"{self.table}: {self.kind} {self.column}"


def live_fields(shape: "StructType") -> list:
    return [f for f in shape.fields if not (f.metadata or {}).get(RETIRED)]


def changes_between(table: str, before: "StructType", after: "StructType") -> list[TableChange]:
    """The changes that turned ``before`` into ``after`` (their live columns): by column id where
    both sides have ids (a rename keeps its id), else by name, taking a column dropped and one
    added at the same position with the same type for a rename."""
    old, new = live_fields(before), live_fields(after)
    ids_old = {_id(f): f for f in old if _id(f) is not None}
    ids_new = {_id(f): f for f in new if _id(f) is not None}
    changes: list[TableChange] = []
    if ids_old and ids_new and len(ids_old) == len(old) and len(ids_new) == len(new):
        for key, field in ids_new.items():
            was = ids_old.get(key)
            if was is None:
                changes.append(TableChange(table, ADD, field.name, _json(field)))
                continue
            if was.name != field.name:
                changes.append(TableChange(table, RENAME, was.name, _json(field), field.name))
            if _type(was) != _type(field):
                changes.append(TableChange(table, RETYPE, field.name, _json(field), old_json=_json(was)))
        changes += [TableChange(table, DROP, f.name) for key, f in ids_old.items() if key not in ids_new]
        return changes
    by_old = {f.name: (i, f) for i, f in enumerate(old)}
    by_new = {f.name: (i, f) for i, f in enumerate(new)}
    dropped = {i: f for name, (i, f) in by_old.items() if name not in by_new}
    for name, (i, field) in by_new.items():
        if name in by_old:
            if _type(by_old[name][1]) != _type(field):
                changes.append(TableChange(table, RETYPE, name, _json(field), old_json=_json(by_old[name][1])))
        elif i in dropped and _type(dropped[i]) == _type(field):
            changes.append(TableChange(table, RENAME, dropped.pop(i).name, _json(field), name))
        else:
            changes.append(TableChange(table, ADD, name, _json(field)))
    changes += [TableChange(table, DROP, f.name) for f in dropped.values()]
    return changes


def with_retired(before: "StructType | None", now: "StructType") -> "StructType":
    """``now`` and, after its columns, every column of ``before`` it no longer has, marked retired:
    rows read from before a drop or rename still carry their values there."""
    from pyspark.sql import types as T

    if before is None:
        return now
    names = {f.name for f in now.fields}
    ids = {_id(f) for f in now.fields if _id(f) is not None}
    kept = [T.StructField(f.name, f.dataType, True, {**(f.metadata or {}), RETIRED: True})
            for f in before.fields if f.name not in names and (_id(f) is None or _id(f) not in ids)]
    return T.StructType([*now.fields, *kept])


_INTEGERS = ("tinyint", "smallint", "int", "bigint")


def widens(old: "StructField", new: "StructField") -> bool:
    """Whether ``new``'s type holds every value of ``old``'s: a wider integer, float to double, a
    decimal with no fewer digits on either side of the point, a longer string."""
    from pyspark.sql import types as T

    a, b = old.dataType, new.dataType
    if isinstance(a, T.DecimalType) and isinstance(b, T.DecimalType):
        return b.scale >= a.scale and b.precision - b.scale >= a.precision - a.scale
    names = (a.simpleString(), b.simpleString())
    if names[0] in _INTEGERS and names[1] in _INTEGERS:
        return _INTEGERS.index(names[1]) >= _INTEGERS.index(names[0])
    if names == ("float", "double"):
        return True
    if isinstance(a, T.StringType) and isinstance(b, T.StringType):
        return _length(new) is None or (_length(old) is not None and _length(new) >= _length(old))
    return a == b


def _length(field) -> int | None:
    import re

    from seatide.plugin.types import SOURCE_TYPE

    found = re.search(r"\((\d+)\)", str((field.metadata or {}).get(SOURCE_TYPE) or ""))
    return int(found.group(1)) if found else None


def _id(field) -> object:
    return (field.metadata or {}).get(COLUMN_ID)


def _type(field) -> tuple:
    from seatide.plugin.types import SOURCE_TYPE

    return field.dataType.simpleString(), (field.metadata or {}).get(SOURCE_TYPE)


def _json(field) -> str:
    return json.dumps(field.jsonValue())


__all__ = ["ADD", "BEHAVIOURS", "COLUMN_ID", "DEFAULT_BEHAVIOUR", "DROP", "RENAME", "RETIRED", "RETYPE",
           "SCHEMA_CHANGED_MARK", "SchemaChanged", "TableChange", "changes_between", "live_fields",
           "schema_change_in", "with_retired"]
