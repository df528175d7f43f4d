"""Decoding of pgoutput's binary messages (protocol version 1), as PostgreSQL documents them.

``pg_logical_slot_peek_binary_changes`` returns one message per row; each decoding call
starts a new pgoutput session, so a Relation message always precedes the first change of
its table in the call's output and the decoder needs no state across calls.

Tuple values arrive in PostgreSQL's text format (``'t'``), or as null (``'n'``) or as an
unchanged TOASTed value (``'u'``) that pgoutput does not send again.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


class _Marker(enum.Enum):
    UNCHANGED_TOAST = "unchanged"   # an enum member: it stays itself when rows are pickled


UNCHANGED_TOAST = _Marker.UNCHANGED_TOAST   # a value pgoutput left out because it did not change


class PgOutputError(ValueError):
    """A message this decoder does not understand (a protocol it was not written for)."""


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    is_key: bool


@dataclass(frozen=True)
class Relation:
    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]


@dataclass
class Change:
    """One row change: ``op`` is 'I', 'U' or 'D'; tuples are column name -> text (or None)."""

    op: str
    relation: Relation
    new: dict | None = None
    old: dict | None = None           # the old row (FULL identity) or its key columns
    old_is_key_only: bool = False


@dataclass
class Transaction:
    xid: int
    end_lsn: int                      # where the transaction's commit record ends: our position
    changes: list[Change] = field(default_factory=list)
    truncated: list[Relation] = field(default_factory=list)


class _Buffer:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def byte(self) -> str:
        value = self.data[self.pos:self.pos + 1].decode("ascii")
        self.pos += 1
        return value

    def cstring(self) -> str:
        end = self.data.index(b"\0", self.pos)
        value = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return value

    def raw(self, length: int) -> bytes:
        value = self.data[self.pos:self.pos + length]
        self.pos += length
        return value


def decode_transactions(messages) -> list[Transaction]:
    """Whole transactions from the rows of a peek, in commit order. Partial ones are dropped
    (a peek returns whole transactions, so there are none unless the output was cut)."""
    relations: dict[int, Relation] = {}
    done: list[Transaction] = []
    current: Transaction | None = None
    for data in messages:
        buf = _Buffer(bytes(data))
        tag = buf.byte()
        if tag == "B":
            _final_lsn, _when, xid = buf.take(">qqi")
            current = Transaction(xid=xid, end_lsn=0)
        elif tag == "C":
            _flags, _commit_lsn, end_lsn, _when = buf.take(">bqqq")
            if current is not None:
                current.end_lsn = end_lsn
                done.append(current)
            current = None
        elif tag == "R":
            relation = _relation(buf)
            relations[relation.oid] = relation
        elif tag in "IUD":
            change = _change(tag, buf, relations)
            if current is not None:
                current.changes.append(change)
        elif tag == "T":
            count, _options = buf.take(">ib")
            oids = [buf.take(">i") for _ in range(count)]
            if current is not None:
                current.truncated += [relations[o] for o in oids if o in relations]
        elif tag in "OYM":
            continue   # origin, type and logical messages carry no row data
        else:
            raise PgOutputError(f"unknown pgoutput message type {tag!r}")
    return done


def _relation(buf: _Buffer) -> Relation:
    oid = buf.take(">i")
    schema, name = buf.cstring(), buf.cstring()
    buf.byte()          # replica identity setting: the key columns' flags below say the same
    count = buf.take(">h")
    columns = []
    for _ in range(count):
        flags = buf.take(">b")
        column_name = buf.cstring()
        type_oid, _typmod = buf.take(">ii")
        columns.append(Column(column_name, type_oid, bool(flags & 1)))
    return Relation(oid, schema, name, tuple(columns))


def _change(tag: str, buf: _Buffer, relations: dict[int, Relation]) -> Change:
    oid = buf.take(">i")
    relation = relations.get(oid)
    if relation is None:
        raise PgOutputError(f"a change refers to relation {oid} before its Relation message")
    change = Change(op=tag, relation=relation)
    marker = buf.byte()
    if marker in "KO":
        change.old = _tuple(buf, relation)
        change.old_is_key_only = marker == "K"
        marker = buf.byte() if tag == "U" else ""
    if marker == "N":
        change.new = _tuple(buf, relation)
    return change


def _tuple(buf: _Buffer, relation: Relation) -> dict:
    count = buf.take(">h")
    values: dict = {}
    for column in relation.columns[:count]:
        kind = buf.byte()
        if kind == "n":
            values[column.name] = None
        elif kind == "u":
            values[column.name] = UNCHANGED_TOAST
        elif kind == "t":
            length = buf.take(">i")
            values[column.name] = buf.raw(length).decode("utf-8")
        else:
            raise PgOutputError(f"unknown tuple value kind {kind!r} (binary mode is not used)")
    return values


def parse_lsn(text: str) -> int:
    high, _, low = str(text).partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"
