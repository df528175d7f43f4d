"""A micro-batch of changes: where it ends (planned on the driver) and its rows (read in a task).

Both stream the slot from the batch's start (``replication.stream``): the plan counts the
changes of whole transactions until there are ``max_rows`` (or ``BATCH_BYTES`` of messages) or it
has caught up with the WAL flushed when it began, keeping their messages only while they take at most ``INLINE_BYTES``
(then the task decodes those, and streams nothing); the read of a larger batch streams the
same transactions again and yields their rows one by one. So no batch is held whole,
whatever the backlog or the size of one transaction, and each batch costs its own changes: a
backlog of N changes is read in time linear in N (the SQL peek this replaces started at the
slot's confirmed position on every batch and read the whole backlog into memory).

A transaction belongs to the batch ``(start, end]`` when its commit record starts before
``end`` (every batch ends at the end of a commit record, or at a position no commit spans).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from seatide.connectors.cdc_way_out import START_OVER
from seatide.connectors.postgres_cdc import replication
from seatide.connectors.postgres_cdc.membership import relation_moved
from seatide.connectors.postgres_cdc.pgoutput import (UNCHANGED_TOAST, Begin, Change, Commit, Decoder, Truncate,
                                                      leaves_values_out, message_tag)
from seatide.connectors.postgres_cdc.tables import CapturedTable, narrow_identity
from seatide.plugin.base import permanent_in_worker
from seatide.plugin.evolution import SchemaChanged
from seatide.plugin.rowkind import RowKind


# A planned batch whose messages take at most this much is handed to its task as those
# messages, sparing the task a second stream (the common, small batch); a larger one is
# streamed again by the task, so no batch is ever held whole.
INLINE_BYTES = 8 << 20
# A batch ends at the first commit after its messages take this much, as it does after
# ``max_rows`` rows: rows of megabytes make batches Spark and the sinks hold with ease (a single
# larger transaction is still one batch: a batch ends at a commit).
BATCH_BYTES = 64 << 20


@dataclass(frozen=True)
class Admitted:
    """Which captured tables' changes a batch reads (the tables its start offset covers, by
    ``schema.table``; None: every captured table), and, for a table added to a resumed job
    (``since``: name -> its snapshot's point), only the transactions whose commit record starts at
    or after that point: the ones before it are in the table's snapshot already."""

    names: frozenset | None = None
    since: dict = field(default_factory=dict)

    def admits(self, schema: str, name: str, commit_lsn: int) -> bool:
        qualified = f"{schema}.{name}"
        if self.names is not None and qualified not in self.names:
            return False
        point = self.since.get(qualified)
        return point is None or commit_lsn >= point


EVERY_TABLE = Admitted()


@dataclass
class BatchPlan:
    end: int                          # the end of the last whole transaction (== start: nothing)
    changes: int                      # rows its changes make at most
    messages: list | None             # its pgoutput messages, when they fit INLINE_BYTES
    bytes: int = 0                    # of its messages, which its rows' values take about as much of
    # an UPDATE left a value out (a table whose identity is not FULL), which the task reads from
    # the table, of any size: ``bytes`` is then only the least the rows take
    lookups: bool = False


def plan_batch(config: dict, slot_name: str, start: int, max_rows: int, flushed: int,
               tables: list[CapturedTable] | None = None, admitted: Admitted = EVERY_TABLE) -> BatchPlan:
    """Whole transactions from ``start`` until they hold ``max_rows`` rows or ``BATCH_BYTES`` of
    messages, or the stream has caught up with ``flushed``. A transaction in which a captured table has another shape than
    ``tables`` say (its Relation message: columns added, dropped, renamed, retyped) starts a batch
    of its own: the batch before it ends at the commit before it, and a batch that starts with it
    stops the query (``shape_changed``), which the runtime starts again with the new shape."""
    plan, in_transaction, size, total, lookups = BatchPlan(start, 0, []), False, 0, 0, False
    looked_up: set[int] = set()                         # relations whose UPDATEs may leave values out
    at_commit = (0, 0)                                  # (changes, messages) at the last commit
    decoder = Decoder(tables[0].encoding) if tables else None
    commit_lsn = 0                                      # of the transaction being read
    for kind, item in replication.stream(config, slot_name, start):
        if kind == "walend":
            if item >= flushed and not in_transaction:
                break
            continue
        total += len(item)
        if plan.messages is not None:
            size += len(item)
            if size <= INLINE_BYTES:
                plan.messages.append(item)
            else:
                plan.messages = None
        tag = message_tag(item)
        if tag == "U" and not lookups and int.from_bytes(item[1:5], "big") in looked_up:
            lookups = leaves_values_out(item)
        if tag == "B":
            in_transaction = True
            if admitted.since:
                commit_lsn = Decoder().decode(item).commit_lsn
        elif tag == "R" and decoder is not None:
            decoder.decode(item)
            relation = decoder.last_relation
            still_captured(relation, tables)
            if any((t.schema, t.name) == (relation.schema, relation.name) and t.identity != "full" for t in tables):
                looked_up.add(relation.oid)
            if not admitted.admits(relation.schema, relation.name, commit_lsn):
                continue                        # not read: its shape then does not matter
            changed = shape_changed(relation, tables, config.get("schema_changes"), config["database"])
            if changed is not None:
                if plan.end > start:            # the batch so far ends before this transaction
                    plan.changes = at_commit[0]
                    if plan.messages is not None:
                        plan.messages = plan.messages[:at_commit[1]]
                    return plan
                raise changed
        elif tag in "IUDT":
            plan.changes += 2 if tag == "U" else 1      # an update may carry its old row too
        elif tag == "C":
            in_transaction, plan.end = False, Decoder().decode(item).end_lsn
            at_commit = (plan.changes, len(plan.messages) if plan.messages is not None else 0)
            plan.bytes, plan.lookups = total, lookups
            if plan.changes >= max_rows or plan.end >= flushed or total >= BATCH_BYTES:
                break
    return plan


def shape_changed(relation, tables: list[CapturedTable], behaviour: str | None,
                  database: str = "") -> Exception | None:
    """The error to stop on when a captured table's Relation message names other columns (or other
    types) than the table has in ``tables``; None when it is the same table, or not a captured one."""
    table = next((t for t in tables if (t.schema, t.name) == (relation.schema, relation.name)), None)
    if table is None:
        return None
    now = [(c.name, c.type_oid, c.typmod) for c in relation.columns]
    if now == [(c.name, c.type_oid, c.typmod) for c in table.live]:
        return None
    known, seen = {c.name for c in table.live}, {c.name for c in relation.columns}
    types = {c.name: (c.type_oid, c.typmod) for c in table.live}
    retyped = [c.name for c in relation.columns if types.get(c.name, (c.type_oid, c.typmod)) != (c.type_oid, c.typmod)]
    detail = (f"gained columns {sorted(seen - known)}" if seen - known else
              f"lost columns {sorted(known - seen)}" if known - seen else
              f"column {retyped[0] if retyped else '?'} changed type (ALTER COLUMN ... TYPE)")
    if behaviour in (None, "exception"):
        option = ("schema changes fail the job (schema.change.behavior = exception)" if behaviour
                  else "schema changes are not followed")
        return permanent_in_worker(
            f"Postgres-CDC: in table {table.qualified}, {detail} while the job ran; {option}. Set "
            f"schema.change.behavior = evolve (or lenient) to follow them, or, to capture the table as it is now, "
            f"{START_OVER}.")
    return SchemaChanged(f"{database}.{table.qualified}", [list(c) for c in now])


def read_changes(config: dict, tables: list[CapturedTable], slot_name: str, start: int, end: int,
                 messages: list | None = None, admitted: Admitted = EVERY_TABLE) -> Iterator[tuple[int, int, dict]]:
    """(row kind, table index, column -> text) of every change in ``(start, end]`` that ``admitted``
    lets through, in order: from the planned ``messages``, or streamed again."""
    behaviour = config.get("schema_changes")
    source = (("data", m) for m in messages) if messages is not None else \
        replication.stream(config, slot_name, start)
    decoder, in_transaction, commit_lsn = Decoder(tables[0].encoding), False, 0
    narrowed: dict[int, str] = {}                   # relation oid -> why its UPDATEs and DELETEs cannot apply
    for kind, item in source:
        if kind == "walend":
            if item >= end and not in_transaction:
                return
            continue
        message = decoder.decode(item)
        if message is None and message_tag(item) == "R":
            relation = decoder.last_relation
            still_captured(relation, tables)
            narrowed.pop(relation.oid, None)
            index = next((i for i, t in enumerate(tables) if (t.schema, t.name) == (relation.schema, relation.name)),
                         None)
            if index is not None and (why := identity_lost(relation, tables[index])) is not None:
                narrowed[relation.oid] = why
        elif isinstance(message, Change) and message.op != "I" and message.relation.oid in narrowed:
            if admitted.admits(message.relation.schema, message.relation.name, commit_lsn):
                raise permanent_in_worker(narrowed[message.relation.oid])
        elif isinstance(message, Begin):
            if message.commit_lsn >= end:
                return
            in_transaction, commit_lsn = True, message.commit_lsn
        elif isinstance(message, Change):
            if admitted.admits(message.relation.schema, message.relation.name, commit_lsn):
                yield from rows_of(message, tables, behaviour, config["database"])
        elif isinstance(message, Truncate):
            truncated(Truncate(tuple(r for r in message.relations
                                     if admitted.admits(r.schema, r.name, commit_lsn))), tables)
        elif isinstance(message, Commit):
            in_transaction = False
            if message.end_lsn >= end:
                return


def rows_of(change: Change, tables: list[CapturedTable], behaviour: str | None = None, database: str = "") -> list:
    index = table_index(change.relation, tables, behaviour, database)
    if index is None:
        return []
    if change.op == "I":
        return [(int(RowKind.INSERT), index, change.new)]
    if change.op == "D":
        return [(int(RowKind.DELETE), index, change.old or {})]
    old = change.old
    # An unchanged large value comes from the old row when the old row is whole (REPLICA
    # IDENTITY FULL); otherwise it stays marked and is read by key (unchanged.py).
    whole = old if old is not None and not change.old_is_key_only else {}
    new = {k: whole.get(k, v) if v is UNCHANGED_TOAST else v for k, v in change.new.items()}
    rows = []
    if old is not None:     # FULL identity, or a key that changed
        rows.append((int(RowKind.UPDATE_BEFORE), index, old))
    rows.append((int(RowKind.UPDATE_AFTER), index, new))
    return rows


def still_captured(relation, tables: list[CapturedTable]) -> None:
    """A Relation message (sent before a table's first change in a session, and again whenever the
    table changes) of a captured table under another oid or another name fails the stream: the
    table was dropped and created again, or renamed (membership.py)."""
    for table in tables:
        moved = relation_moved(relation, table)
        if moved is not None:
            raise permanent_in_worker(moved)


def identity_lost(relation, table: CapturedTable) -> str | None:
    """Why the table's UPDATEs and DELETEs under this Relation cannot be applied, or None. They log
    of the old row the columns the Relation flags as the replica identity's: the table's key must
    be among them (every column, for a table without a key). The job checked this when it started;
    this is an ``ALTER TABLE ... REPLICA IDENTITY`` made while it runs (the stream fails at the
    first UPDATE or DELETE logged so). A key column the Relation does not name (renamed since) is
    left to the shape's own checks."""
    names = {c.name for c in relation.columns}
    logged = [c.name for c in relation.columns if c.is_key]
    needed = {k for k in table.keys if k in names} if table.keys else names
    if needed <= set(logged):
        return None
    return (f"Postgres-CDC: the replica identity of {table.qualified} changed while the job ran, and "
            f"{narrow_identity(table.qualified, table.keys, logged, START_OVER)} (the changes logged since "
            "cannot be applied)")


def truncated(message: Truncate, tables: list[CapturedTable]) -> None:
    """A TRUNCATE has no row kind to carry it; rows the target keeps would be silently stale."""
    names = [tables[i].qualified for i in (table_index(r, tables) for r in message.relations) if i is not None]
    if names:
        raise permanent_in_worker(
            f"Postgres-CDC: {', '.join(names)} was truncated while the job ran. A TRUNCATE has no row kind, so "
            "the sink cannot apply it, and skipping it would leave the deleted rows in the target. Empty the "
            f"target table yourself and {START_OVER}")


def table_index(relation, tables: list[CapturedTable], behaviour: str | None = None,
                database: str = "") -> int | None:
    """The index of the relation's table in ``tables`` (None: not captured). Its rows are read into
    the columns the job has for the table by name: a row of another shape stops the query as the
    planning does (``shape_changed``), except a row from before a change the job has already taken
    in (its columns are all known: retired columns keep what a dropped or renamed one held)."""
    for i, table in enumerate(tables):
        if (table.schema, table.name) == (relation.schema, relation.name):
            if behaviour in (None, "exception") or not {c.name for c in relation.columns} <= \
                    {c.name for c in table.columns}:
                changed = shape_changed(relation, tables, behaviour, database)
                if changed is not None:
                    raise changed
            return i
    return None

