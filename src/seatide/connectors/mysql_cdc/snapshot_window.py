"""What a snapshot already holds of the binlog between the tables' description and its position.

A first snapshot (or an added table's) is read after its consistent binlog position *P*, and the
binlog from no later than where the query described its tables (stream.py ``_snapshot_start``):
each table's description is of its own position (``ddl_at``, catalog.described_at), and the
stream starts at the earliest of them. For each table this module finds the position its binlog
changes are read after (the offset's ``since``):

* its own description's position: events up to it are in the description and in the snapshot;
  read again, a row of the layout before an ALTER that the description holds met the shape
  after it;
* past that, and no later than *P*, a TRUNCATE of it, a DROP and a CREATE of it with the
  columns the description has (types, character sets, NOT NULL, defaults: what the binlog's
  decoders and a target are made from), or a change of it logged as text (binlog_format =
  STATEMENT; a LOAD DATA's is an Execute_load_query event): the snapshot, read after *P*, holds
  the table as it is after the statement, so the statement and the table's changes before it are
  passed over. Refused, the job had to start over though nothing was lost; read, the rows a
  TRUNCATE removed came back.

A table dropped and not created again, or created again otherwise, is refused here, as the
stream refuses it (binlog.refuse_rowless), before a split reads it with the wrong columns (or its
bytes are decoded in the wrong character set), also after an ALTER of it. An ALTER of the table
in the window followed by a statement the snapshot holds stops the query (binlog.follow_alter)
before a split is read: it starts again with the ALTER in the table's shape, from which the
window holds the statement alone. Passing the statement over at once would pass the ALTER over
too; leaving it to the stream refused it. A statement logged as text that changes the table
through a trigger of another is left to the stream.
"""

from __future__ import annotations

from seatide.connectors.mysql_cdc.batch_end import logged_statement
from seatide.connectors.mysql_cdc.binlog import follow_alter, refuse_rowless
from seatide.connectors.mysql_cdc.binlog_events import file_events
from seatide.connectors.mysql_cdc.catalog import CapturedTable, CatalogError, ServerConfig, captured_table
from seatide.connectors.mysql_cdc.position import BinlogPosition
from seatide.connectors.mysql_cdc.statements import ALTER, CREATE, DML, DROP, TRUNCATE, touched

# statements the snapshot holds the outcome of (DML: logged as text, by a session with binlog_format = STATEMENT)
_HELD = (TRUNCATE, DROP, CREATE, DML)


def snapshot_since(conn, config: ServerConfig, tables: list[CapturedTable], described: dict, start: BinlogPosition,
                   end: BinlogPosition, files: list[str], behaviour: str | None = None,
                   server: str | None = None) -> dict:
    """``{table name: [file, pos]}``: where each of ``tables`` has its binlog changes read after, in a
    snapshot at ``end`` whose binlog is read from ``start`` (``described``: each table's description
    position, where it is of this server's binlog). Names whose changes start at ``start`` are left out.
    ``behaviour``, ``server``: as the stream follows an ALTER TABLE (binlog.follow_alter)."""
    captured = {(t.database, t.table): t for t in tables}
    since = {t.name: at for t in tables if (at := described.get(t.name)) is not None and at > start}
    held: dict = {}                     # table -> where the last statement the snapshot holds the outcome of ends
    altered: dict = {}                  # table -> [(default database, statement, where)] of its ALTERs
    before_held: dict = {}              # table -> its ALTERs before that statement
    dropped: dict = {}                  # table -> (default database, statement, where) of its DROP
    for here, info in _statements(conn, start, end, files):
        schema, statement = logged_statement(info)
        found, keys = touched(statement, schema, captured, (*_HELD, ALTER))
        for key in keys:
            name = captured[key].name
            if here <= since.get(name, start):
                continue
            if found.kind == ALTER:
                altered.setdefault(name, []).append((schema, statement, here))
                continue
            held[name], before_held[name] = here, list(altered.get(name, []))
            if found.kind == DROP:
                dropped[name] = (schema, statement, here)
    for key, table in captured.items():
        if table.name in dropped and not _same_table(conn, config, table):
            schema, statement, here = dropped[table.name]
            refuse_rowless(schema, statement, here, {key: table})
        for schema, statement, here in before_held.get(table.name, []):
            # the snapshot holds the table after the ALTER, the shape only up to the description: the
            # query starts again with the ALTER in the shape (an ALTER that changes no column is passed over)
            follow_alter(schema, statement, here, {key: table}, behaviour, server)
        if table.name in held:
            since[table.name] = held[table.name]
    return {name: [at.file, at.pos] for name, at in since.items()}


def _same_table(conn, config: ServerConfig, table: CapturedTable) -> bool:
    """Whether the server describes ``table`` now as the job does: created again as it was."""
    try:
        now = captured_table(conn, config, table.database, table.table)
    except CatalogError:
        return False
    return _decoded_as(now) == _decoded_as(table) and now.key == table.key


def _decoded_as(table: CapturedTable) -> list:
    """What the binlog decoders and a target table are made from, per column the table has: its name,
    types, character set (the same bytes are other text in another), NOT NULL and default."""
    charsets = table.charsets or (None,) * len(table.described)
    definitions = table.definitions or ((False, None),) * len(table.described)
    return [(tuple(row[:5]), charset, definition) for row, charset, definition
            in zip(table.described, charsets, definitions) if row[0] not in table.retired]


def _statements(conn, start: BinlogPosition, end: BinlogPosition, files: list[str]):
    """(where it ends, Info) of each statement logged as text between ``start`` and ``end``: a Query
    event, or the Execute_load_query event of a LOAD DATA (its Info as a Query event's)."""
    later = files[files.index(start.file):] if start.file in files else []
    for file in later:
        for _at, kind, stop, info in file_events(conn, file, start.pos if file == start.file else 4):
            here = BinlogPosition.of(file, stop)
            if here > end:
                return
            if kind in ("Query", "Execute_load_query"):
                yield here, info
