"""Reading the changes between two binlog positions with mysql-replication.

A range ``[start, end)`` always yields the same rows: ``end`` is a position the server
reported after a committed transaction, and every row event up to it belongs to a
committed transaction. Events are positioned by their *end* offset in the file, so an
event belongs to the range when its end is at most ``end``. We read without blocking and
stop at the first event past ``end``, so a batch never waits for new changes.
"""

from __future__ import annotations

import itertools
from typing import Iterator, Sequence

import pymysql
from pyspark.sql.datasource import InputPartition

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.mysql_cdc.batches import BatchBuilder
from seatide.connectors.mysql_cdc.binlog_values import layout_difference, prepare, retyped_by_name
from seatide.connectors.mysql_cdc.catalog import CapturedTable, ServerConfig
from seatide.connectors.mysql_cdc.ddl import UnknownDdl, altered_table, parse_alter
from seatide.connectors.mysql_cdc.gone_rows import GoneRows
from seatide.connectors.mysql_cdc.position import BinlogPosition, lost_position_message
from seatide.connectors.mysql_cdc.row_images import MISSING, RowCompleter, image_values, left_out_as_null
from seatide.connectors.mysql_cdc.row_keys import key_of
from seatide.connectors.mysql_cdc.statements import DML, DROP, RENAME, TRUNCATE, touched
from seatide.connectors.mysql_cdc.triggers import Triggers
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.evolution import SchemaChanged
from seatide.plugin.rowkind import RowKind

# The server's answer when a replica asks for a binlog file it no longer has.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


class BinlogRange(InputPartition):
    """The changes in ``[start, end)`` of the tables ``covered`` (``database.table``; None: every
    captured one); of a table in ``since``, only events ending after its ``[file, pos]`` (a table
    added to a resumed job: the earlier ones are in its snapshot). ``server``: whose binlog the
    positions are in."""

    def __init__(self, start: BinlogPosition, end: BinlogPosition, covered=None, since: dict | None = None,
                 server: str | None = None):
        super().__init__((str(start), str(end)))
        self.start, self.end, self.server = start, end, server
        self.covered = frozenset(covered) if covered is not None else None
        self.since = {name: BinlogPosition.of(*at) for name, at in (since or {}).items()}


def read_range(config: ServerConfig, tables: Sequence[CapturedTable], part: BinlogRange, tag=None,
               behaviour: str | None = None) -> Iterator:
    """Arrow batches of the changes in the range, one table's rows per batch (each table's rows in
    binlog order, numbered in commit order across tables); ``tag(batch, table index)`` puts a batch
    in the multi-table shape."""
    builders: dict[int, BatchBuilder] = {}
    numbering = itertools.count()

    def tagged(batch, index: int):
        return batch if tag is None else tag(batch, index)

    for index, values, kind in _changes(config, tables, part, behaviour):
        builder = builders.get(index)
        if builder is None:
            builder = builders[index] = BatchBuilder(tables[index].columns, numbering=numbering)
        batch = builder.add(values, kind)
        if batch is not None:
            yield tagged(batch, index)
    for index, builder in builders.items():
        last = builder.flush()
        if last is not None:
            yield tagged(last, index)


def _changes(config: ServerConfig, tables: Sequence[CapturedTable], part: BinlogRange,
             behaviour: str | None = None) -> Iterator:
    from pymysqlreplication.event import (ExecuteLoadQueryEvent, GtidEvent, MariadbGtidEvent, QueryEvent,
                                          RotateEvent, XidEvent)
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    captured = {(t.database, t.table): t for t in tables
                if part.covered is None or t.name in part.covered}
    index_of = {(t.database, t.table): i for i, t in enumerate(tables)}
    since = {tuple(name.split(".", 1)): at for name, at in part.since.items()}
    completer, gone = RowCompleter(config), GoneRows()
    triggers = Triggers(config)
    checked: set[int] = set()      # table ids whose layout was compared (an ALTER gets a new id)
    by_name: dict[int, bool] = {}  # table id -> its rows are read by column name (not by position)
    stream = _binlog_stream(config, tables, part.start, [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent,
                                                         QueryEvent, RotateEvent, GtidEvent, MariadbGtidEvent,
                                                         ExecuteLoadQueryEvent])
    gtid = None         # the GTID of the transaction being read (a DDL statement's, for its shape)
    try:
        for event in _events(stream, part.start):
            # A rotate event's position is in the file it ends, not in the one it names.
            if not isinstance(event, RotateEvent) and event.packet.log_pos and BinlogPosition.of(stream.log_file, event.packet.log_pos) > part.end:
                break
            if isinstance(event, (GtidEvent, MariadbGtidEvent)):
                gtid = str(event.gtid)
                continue
            if isinstance(event, (QueryEvent, ExecuteLoadQueryEvent)):
                here = BinlogPosition.of(stream.log_file, event.packet.log_pos)
                current = tables_at(captured, since, here)
                if isinstance(event, ExecuteLoadQueryEvent):
                    refuse_rowless(*_load_query(event), here, current, triggers)
                    continue
                schema = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
                refuse_rowless(schema or None, event.query or "", here, current, triggers)
                follow_alter(schema or None, event.query or "", here, current, behaviour,
                             getattr(part, "server", None), gtid)
                continue
            name = (getattr(event, "schema", None), getattr(event, "table", None))
            table = captured.get(name)
            if table is None:
                continue
            if name in since and BinlogPosition.of(stream.log_file, event.packet.log_pos) <= since[name]:
                continue        # a change the table's own snapshot, read after it, holds
            index = index_of[name]
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                if event.table_id not in checked:
                    by_name[event.table_id] = _check_layout(table, event.table_map[event.table_id], behaviour)
                    checked.add(event.table_id)
                named = by_name[event.table_id]
                prepare(event.columns)      # before .rows decodes them: see binlog_values
            here = BinlogPosition.of(stream.log_file, event.packet.log_pos)
            if isinstance(event, WriteRowsEvent):
                inserted = [image_values(event, row, "values", table, named) for row in event.rows]
                for row, values in zip(inserted, completer.complete(table, inserted)):
                    if values is None:          # gone by now: left out while a later removal is certain
                        gone.hold(table, key_of(table, row), here)
                    else:
                        yield index, values, RowKind.INSERT
            elif isinstance(event, UpdateRowsEvent):
                pairs = [(image_values(event, row, "before", table, named), image_values(event, row, "after", table, named))
                         for row in event.rows]
                # a column an after image left out did not change: the before image may have it
                wanted = [[b if a is MISSING else a for b, a in zip(before, after)] for before, after in pairs]
                for (before, _), row, after in zip(pairs, wanted, completer.complete(table, wanted)):
                    if gone and key_of(table, before) != key_of(table, row):
                        gone.removed(table.name, key_of(table, before))
                    yield index, left_out_as_null(before), RowKind.UPDATE_BEFORE
                    if after is None:
                        gone.hold(table, key_of(table, row), here)
                    else:
                        yield index, after, RowKind.UPDATE_AFTER
            elif isinstance(event, DeleteRowsEvent):
                for row in event.rows:
                    values = left_out_as_null(image_values(event, row, "values", table, named))
                    if gone:
                        gone.removed(table.name, key_of(table, values))
                    yield index, values, RowKind.DELETE
    finally:
        stream.close()
        completer.close()
    gone.confirm(lambda: _removals_after(config, captured, part.end, behaviour, gone))


def _binlog_stream(config: ServerConfig, tables, start: BinlogPosition, events: list):
    """A non-blocking read of ``events`` of ``tables`` from ``start`` to where the binlog ends now."""
    from pymysqlreplication import BinLogStreamReader

    return BinLogStreamReader(
        connection_settings=config.replication_settings, server_id=config.server_id,
        resume_stream=True, log_file=start.file, log_pos=start.pos, blocking=False, only_events=events,
        only_schemas=sorted({t.database for t in tables}), only_tables=sorted({t.table for t in tables}),
        # A table's map event is decoded once per read: a table id names one table layout
        # (ALTER TABLE gets a new id), and decoding every map event doubled the cost per change.
        freeze_schema=True)


def _removals_after(config: ServerConfig, captured: dict, end: BinlogPosition, behaviour: str | None,
                    gone: GoneRows) -> Iterator[tuple[str, tuple]]:
    """(table, key) of each DELETE, and each UPDATE moving a key away, of a table with a held key
    (gone_rows), in the binlog from ``end`` until it ends now. A change the stream will refuse
    there (refuse_rowless: TRUNCATE, DROP, a statement logged without rows) fails as the stream
    would; rows past an ALTER TABLE are read by the names the binlog gives them, or end the look."""
    from pymysqlreplication.event import ExecuteLoadQueryEvent, QueryEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent

    held = {name: t for name, t in captured.items() if gone.holds(t.name)}
    stream = _binlog_stream(config, held.values(), end, [DeleteRowsEvent, UpdateRowsEvent, QueryEvent,
                                                         ExecuteLoadQueryEvent])
    triggers = Triggers(config)
    try:
        for event in _events(stream, end):
            if isinstance(event, (QueryEvent, ExecuteLoadQueryEvent)):
                schema, statement = _load_query(event) if isinstance(event, ExecuteLoadQueryEvent) else (
                    (event.schema.decode() if isinstance(event.schema, bytes) else event.schema) or None, event.query)
                refuse_rowless(schema, statement or "", BinlogPosition.of(stream.log_file, event.packet.log_pos),
                               held, triggers)
                continue
            table = held.get((event.schema, event.table))
            if table is None:
                continue
            layout = event.table_map[event.table_id]
            named = getattr(layout, "column_name_flag", False)
            if not named and layout_difference(table.live, layout) is not None:
                return          # rows that cannot be read by position: the look ends here
            prepare(event.columns)
            for row in event.rows:
                images = ("values",) if isinstance(event, DeleteRowsEvent) else ("before", "after")
                keys = [key_of(table, image_values(event, row, image, table, named)) for image in images]
                if len(keys) == 1 or keys[0] != tuple(b if a is MISSING else a for b, a in zip(*keys)):
                    yield table.name, keys[0]
    finally:
        stream.close()


def _events(stream, start: BinlogPosition) -> Iterator:
    try:
        yield from stream
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_MASTER_FATAL_ERROR_READING_BINLOG:
            raise permanent_in_worker(lost_position_message(start, None) + f" (server: {exc.args[1]})") from None
        raise


def refuse_rowless(schema: str | None, statement: str, here: BinlogPosition, captured: dict,
                   triggers: Triggers | None = None) -> None:
    """A change of a captured table that the binlog holds as a statement, without rows, fails the
    stream: no sink can apply a statement, and passing it over would leave the target without the
    change for good. TRUNCATE, DROP TABLE and RENAME TABLE (of a captured name to another, unless
    the statement names a table to it: a swap) are always logged so; INSERT, UPDATE, DELETE, REPLACE
    and LOAD DATA when the session that ran them logged statements (binlog_format = STATEMENT or
    MIXED: the server's check at the start sees only the global setting, and a session may set its
    own). A statement-logged change of another table whose trigger changes a captured table fails it
    too (``triggers``: the server's, looked up only then; mysql_cdc/triggers.py)."""
    found, names = touched(statement, schema, captured, (DML, TRUNCATE, DROP, RENAME))
    names = found.renamed_away(captured) if found.kind == RENAME else names
    text = " ".join(statement.split())[:300]
    fired = triggers.firing(found.tables, captured) if not names and found.kind == DML and triggers else None
    if fired is not None:
        trigger, on, key = fired
        raise permanent_in_worker(
            f"MySQL-CDC: {captured[key].name} may have been changed at binlog {here} by trigger {trigger} of {on}, "
            f"fired by a statement logged as text, without rows: {text}. A trigger's changes are not logged when "
            "the statement is (binlog_format = STATEMENT or MIXED in that session), so no sink can apply them, "
            f"and skipping them would leave the target without them. Make every client that writes {on} log rows "
            "(binlog_format = ROW on the server, and no SET SESSION binlog_format), then bring the target level "
            f"with the source: {START_OVER}")
    if not names:
        return
    table = captured[names[0]].name
    if found.kind == TRUNCATE:
        raise permanent_in_worker(
            f"MySQL-CDC: {table} was truncated after the job described it (at binlog {here}: {text}). A TRUNCATE is logged "
            "as a statement without rows, so no sink can apply it, and skipping it would leave the deleted rows "
            f"in the target. Empty the target table yourself and {START_OVER}")
    if found.kind in (DROP, RENAME):
        gone = "dropped" if found.kind == DROP else "renamed away"
        raise permanent_in_worker(
            f"MySQL-CDC: {table} was {gone} after the job described it (at binlog {here}: {text}). Its rows went without "
            "a row event, so the target would keep them, and a table created again under its name is not the "
            "one the job described. Remove the table from table-names, or empty the target table yourself, "
            f"and {START_OVER}")
    raise permanent_in_worker(
        f"MySQL-CDC: {table} was changed at binlog {here} by a statement logged as text, without rows: {text}. "
        "The session that ran it had binlog_format = STATEMENT or MIXED (SET SESSION binlog_format, or the "
        "server's setting at the time), so no sink can apply the change, and skipping it would leave the "
        f"target without it. Make every client that writes {table} log rows (binlog_format = ROW on the server, "
        "and no SET SESSION binlog_format: only users with SUPER or BINLOG ADMIN may set it), then bring the "
        f"target level with the source: {START_OVER}")


def _load_query(event) -> tuple[str | None, str]:
    """(default database, statement) of a LOAD DATA that a session logging statements ran: the
    library reads the event's fixed fields only; the rest is laid out as a Query event's."""
    packet = event.packet
    packet.read(event.status_vars_length)
    schema = packet.read(event.schema_length).decode("utf-8", "replace")
    packet.read(1)
    query = packet.read(event.event_size - 26 - event.status_vars_length - event.schema_length - 1)
    return schema or None, query.decode("utf-8", "replace")


def tables_at(captured: dict, since: dict, here: BinlogPosition) -> dict:
    """The captured tables whose changes an event ending at ``here`` is one of (a table added to a
    resumed job: not the events its own snapshot holds)."""
    return {k: t for k, t in captured.items() if k not in since or here > since[k]}


def follow_alter(schema: str | None, statement: str, here: BinlogPosition, captured: dict, behaviour: str | None,
                 server: str | None = None, gtid: str | None = None) -> None:
    """An ALTER TABLE of a captured table (``statement``, logged with default database ``schema`` and
    ending at ``here``) that its shape does not hold yet (past ``ddl_at``) stops the query
    (``SchemaChanged`` with the statement), for the source to apply it to the shape it reads the
    table with (shapes.py): each statement in its turn, at its place in the stream, with the rows
    before it read with the shape before it and the rows after it with the one after it. The stop
    comes where the batch that starts with the statement is planned (stream.py; batch_end.py starts
    a batch at each), between batches; met here while reading (a batch planned without that check,
    replayed from an older checkpoint), it stops the batch's task. One that changes no column is
    passed over. ``ddl_at`` names its server and the statement's GTID (``[file, pos, server, gtid]``): a
    shape of another server's position (kept from before a failover) holds, of this binlog, only the
    statement of that GTID (the query stopped at it and the failover came before its batch was
    done); the stream resumed after every earlier one."""
    target = altered_table(statement, schema)
    table = captured.get(target) if target is not None else None
    if table is None or _in_shape(table.ddl_at, here, server, gtid):
        return
    try:
        changes = parse_alter(statement, schema).changes
    except UnknownDdl as exc:
        raise permanent_in_worker(
            f"MySQL-CDC: {table.name} was altered at binlog {here} by a statement whose effect on its columns "
            f"SeaTide cannot tell ({exc}): {statement}. Reading on would put values in the wrong columns; "
            f"{START_OVER}") from None
    if not changes:
        return
    if behaviour in (None, "exception"):
        raise permanent_in_worker(
            f"MySQL-CDC: the table {table.name} changed while the job ran (at binlog {here}: {statement}) and "
            "schema.change.behavior = exception. Set schema.change.behavior = evolve (or lenient) to follow "
            f"its changes, or, to capture the table as it is now, {START_OVER}")
    at = [here.file, here.pos] + ([server, gtid] if server is not None else [])
    raise SchemaChanged(table.name, {"ddl": statement, "schema": schema, "at": at})


def _in_shape(ddl_at, here: BinlogPosition, server: str | None, gtid: str | None) -> bool:
    """Whether a statement logged at ``here`` of ``server`` (GTID ``gtid``) is in a shape of
    position ``ddl_at``."""
    if ddl_at is None:
        return False
    if len(ddl_at) > 2 and server is not None and ddl_at[2] != server:
        return len(ddl_at) > 3 and gtid is not None and ddl_at[3] == gtid
    return here <= BinlogPosition.of(ddl_at[0], ddl_at[1])


def _check_layout(table: CapturedTable, layout, behaviour: str | None) -> bool:
    """Whether rows of this table map are read by column name (True) or by position. A map that
    matches the columns the job reads the table with is read by position; under a behaviour that
    follows schema changes, one that names its columns (binlog_row_metadata = FULL) and names only
    known ones (retired columns included) is read by name; any other stops the query (plugin/evolution.py)."""
    difference = layout_difference(table.live, layout)
    if not difference:
        return False
    if behaviour in (None, "exception"):
        raise permanent_in_worker(
            f"MySQL-CDC: the table {table.name} changed while the job ran: in the binlog {difference}. "
            "Matching its values to the columns the job started with would put them in the wrong columns; "
            "schema changes are not followed (schema.change.behavior = exception, or no behaviour). Set "
            f"schema.change.behavior = evolve (or lenient) to follow them, or, to capture the table as it is now, "
            f"{START_OVER}")
    if getattr(layout, "column_name_flag", False) and retyped_by_name(table.described, layout) is None:
        return True
    raise SchemaChanged(table.name, {"binlog": difference})
