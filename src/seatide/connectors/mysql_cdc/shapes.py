"""A captured table's shape across DDL statements: the kept shape, one ALTER TABLE at a time.

The shape a pipeline ran with is kept beside its checkpoint (runtime/schema_evolution.py) with
each column's id and the binlog position it is of (``ddl_at``). When the stream reaches an ALTER
TABLE of the table past that position, the reader stops the query (binlog.py) and the source
applies that one statement to the kept shape (``after_ddl``): the columns it names, in its order,
renames keeping their ids. The server is asked only for what a statement leaves out (a column's
full description, its character set), and only of a column the statement names: where the server
no longer describes that column as the statement wrote it (it is several changes further), the
description is made from the statement, or refused when the statement cannot tell it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from seatide.connectors.mysql_cdc.catalog import CapturedTable
from seatide.connectors.mysql_cdc.ddl import ADD, DROP, RENAME, ColumnDef, parse_alter, same_type

_CHARACTER = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}


class ShapeError(ValueError):
    """A statement that does not fit the kept shape, or a column it cannot describe."""


def numbered(table: CapturedTable, at: tuple | None) -> CapturedTable:
    """``table`` with ids for its columns (in order, where it has none) and the position it is of."""
    ids = table.ids if len(table.ids) == len(table.described) and all(
        i is not None for i, row in zip(table.ids, table.described) if row[0] not in table.retired) else ()
    if not ids:
        ids = tuple(range(1, len(table.described) + 1))
    return replace(table, ids=ids, ddl_at=table.ddl_at if table.ddl_at is not None else at)


def after_ddl(table: CapturedTable, statement: str, default_database: str | None, at: tuple,
              server: CapturedTable | None) -> CapturedTable:
    """The shape ``table`` has after ``statement`` (logged at ``at``), its live columns first and its
    retired ones (dropped, renamed from) after them. ``server``: the table as described now."""
    alter = parse_alter(statement, default_database)
    charsets = table.charsets or (None,) * len(table.described)
    definitions = table.definitions or ((False, None),) * len(table.described)
    columns = [[i, row, charset, defined] for i, row, charset, defined
               in zip(table.ids, table.described, charsets, definitions)]
    live = [c for c in columns if c[1][0] not in table.retired]
    retired = [c for c in columns if c[1][0] in table.retired]
    next_id = max([i for i in table.ids if i is not None] or [0]) + 1
    for change in alter.changes:
        found = _find(live, change.column)
        if change.kind == ADD:
            if found is not None:
                if change.if_exists:
                    continue
                raise ShapeError(f"it adds column {change.column}, which the table has already")
            retired = [c for c in retired if c[1][0].lower() != change.column.lower()]
            _place(live, [next_id, *_described(change.definition, server, table), _defined(change.definition)],
                   change.place)
            next_id += 1
            continue
        if found is None:
            if change.if_exists:
                continue
            raise ShapeError(f"it {change.kind}s column {change.column}, which the table does not have "
                             f"(it has {', '.join(c[1][0] for c in live)})")
        if change.kind == DROP:
            live.remove(found)
            retired = [c for c in retired if c[1][0].lower() != change.column.lower()] + [found]
            continue
        new_name = change.new_name or found[1][0]
        if new_name.lower() != found[1][0].lower() and _find(live, new_name) is not None:
            raise ShapeError(f"it renames column {change.column} to {new_name}, which the table has already")
        if new_name != found[1][0]:
            retired = [c for c in retired if c[1][0].lower() not in (new_name.lower(), found[1][0].lower())]
            retired.append([None, found[1], found[2], found[3]])   # rows from before still carry the old name
        if change.kind == RENAME:
            found[1] = (new_name, *found[1][1:])
            continue
        row, charset = _described(change.definition, server, table)       # REDEFINE (CHANGE, MODIFY)
        found[1], found[2], found[3] = row, charset, _defined(change.definition)
        if change.place is not None:
            live.remove(found)
            _place(live, found, change.place)
    columns = [*live, *retired]
    return replace(table, described=tuple(tuple(c[1]) for c in columns), charsets=tuple(c[2] for c in columns),
                   ids=tuple(c[0] for c in columns), retired=tuple(c[1][0] for c in retired), ddl_at=tuple(at),
                   definitions=tuple(c[3] for c in columns))


def _defined(definition: ColumnDef) -> tuple:
    """The column's (NOT NULL, default) as the statement defines it: at this point of the binlog the
    statement is the record of it (the server's description may be of a later change)."""
    return definition.not_null, definition.default


def _find(columns: list, name: str):
    return next((c for c in columns if c[1][0].lower() == name.lower()), None)


def _place(columns: list, column: list, place: tuple | None) -> None:
    if place is None:
        columns.append(column)
    elif place[0] == "first":
        columns.insert(0, column)
    else:
        after = _find(columns, place[1])
        if after is None:
            raise ShapeError(f"it puts column {column[1][0]} after {place[1]}, which the table does not have")
        columns.insert(columns.index(after) + 1, column)


_INTEGER_PRECISION = {"tinyint": 3, "smallint": 5, "mediumint": 7, "int": 10, "bigint": 19}


def _described(definition: ColumnDef, server: CapturedTable | None, table: CapturedTable) -> tuple[tuple, str | None]:
    """The information_schema row (name, DATA_TYPE, COLUMN_TYPE, precision, scale) and character set
    of a column the statement defines: the server's, where it still describes the column so; else
    made from the statement."""
    now = None
    if server is not None:
        now = next(((row, charset) for row, charset in zip(server.live, server.charsets or (None,) * len(server.live))
                    if row[0].lower() == definition.name.lower()), None)
    if now is not None and same_type(definition.type_text, now[0][2]) and (
            definition.charset is None or (now[1] or "").lower() == definition.charset):
        return (definition.name, *now[0][1:]), now[1]
    if definition.data_type in _CHARACTER and definition.charset is None:
        described = f"{now[0][2]} {now[1]}" if now is not None else "no such column"
        raise ShapeError(f"it defines column {definition.name} as {definition.type_text} without a character "
                         f"set, and the server, further on, describes it otherwise ({described})")
    precision = scale = None
    if definition.data_type == "decimal":
        digits = [int(d) for d in re.findall(r"\d+", definition.type_text)]
        precision, scale = (digits[0] if digits else 10), (digits[1] if len(digits) > 1 else 0)
    elif definition.data_type in _INTEGER_PRECISION:
        precision, scale = _INTEGER_PRECISION[definition.data_type], 0
    return (definition.name, definition.data_type, definition.type_text, precision, scale), definition.charset


__all__ = ["ShapeError", "after_ddl", "numbered"]
