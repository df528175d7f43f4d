"""Decoding of pgoutput's binary messages (protocol version 1), as PostgreSQL documents them.

A replication session (``START_REPLICATION``) sends one message per CopyData; each session
is a new pgoutput session, so a Relation message precedes the first change of its table in
it, and a ``Decoder`` lives as long as one session.

Tuple values arrive in PostgreSQL's text format (``'t'``), or as null (``'n'``) or as an
unchanged TOASTed value (``'u'``) that pgoutput does not send again.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass


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
    typmod: int = -1         # pg_attribute.atttypmod: varchar(40), numeric(10,2)...


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


@dataclass(frozen=True)
class Begin:
    commit_lsn: int                   # where the transaction's commit record starts
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int                      # where the transaction's commit record ends: our position


@dataclass(frozen=True)
class Truncate:
    relations: tuple[Relation, ...]


class _Buffer:
    def __init__(self, data: bytes, encoding: str = "utf-8"):
        self.data, self.pos, self.encoding = data, 0, encoding

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
        value = self.data[self.pos:end].decode(self.encoding)
        self.pos = end + 1
        return value

    def raw(self, length: int) -> bytes:
        value = self.data[self.pos:self.pos + length]
        self.pos += length
        return value


class Decoder:
    """Decodes one replication session's messages in order. Relation messages are remembered:
    each session sends one before the first change of a table (and again when it changes)."""

    def __init__(self, encoding: str = "utf-8"):
        self.relations: dict[int, Relation] = {}
        self.last_relation: Relation | None = None
        self.encoding = encoding           # the database's: pgoutput sends text as stored

    def decode(self, data) -> Begin | Commit | Change | Truncate | None:
        """One message; None for those that carry nothing for us (relations, types, origins)."""
        buf = _Buffer(bytes(data), self.encoding)
        tag = buf.byte()
        if tag == "B":
            commit_lsn, _when, xid = buf.take(">qqi")
            return Begin(commit_lsn, xid)
        if tag == "C":
            _flags, commit_lsn, end_lsn, _when = buf.take(">bqqq")
            return Commit(commit_lsn, end_lsn)
        if tag == "R":
            relation = _relation(buf)
            self.relations[relation.oid] = self.last_relation = relation
            return None
        if tag in "IUD":
            return _change(tag, buf, self.relations)
        if tag == "T":
            count, _options = buf.take(">ib")
            oids = [buf.take(">I") for _ in range(count)]
            return Truncate(tuple(self.relations[o] for o in oids if o in self.relations))
        if tag in "OYM":
            return None   # origin, type and logical messages carry no row data
        raise PgOutputError(f"unknown pgoutput message type {tag!r}")


def leaves_values_out(data) -> bool:
    """Whether an UPDATE message's new row has a value pgoutput left out (``'u'``: an unchanged
    TOASTed value, which the reader then reads from the table), found without decoding any text."""
    if chr(data[0]) != "U":
        return False
    pos = 5                                  # the tag and the relation's oid
    if chr(data[pos]) in "KO":
        _, pos = _tuple_kinds(data, pos + 1)
    kinds, _ = _tuple_kinds(data, pos + 1)   # after the 'N'
    return "u" in kinds


def _tuple_kinds(data, pos: int) -> tuple[list[str], int]:
    """The kind of each value of the tuple at ``pos``, and where the tuple ends."""
    count, pos = struct.unpack_from(">h", data, pos)[0], pos + 2
    kinds = []
    for _ in range(count):
        kind, pos = chr(data[pos]), pos + 1
        kinds.append(kind)
        if kind == "t":
            pos += 4 + struct.unpack_from(">i", data, pos)[0]
    return kinds, pos


def message_tag(data) -> str:
    """The kind of a message without decoding it ('B', 'C', 'I', 'U', 'D', ...)."""
    return chr(data[0])


def _relation(buf: _Buffer) -> Relation:
    oid = buf.take(">I")            # an oid is unsigned
    schema, name = buf.cstring(), buf.cstring()
    buf.byte()          # replica identity setting: the key columns' flags below say the same
    count = buf.take(">h")
    columns = []
    for _ in range(count):
        flags = buf.take(">b")
        column_name = buf.cstring()
        type_oid, typmod = buf.take(">ii")
        columns.append(Column(column_name, type_oid, bool(flags & 1), typmod))
    return Relation(oid, schema, name, tuple(columns))


def _change(tag: str, buf: _Buffer, relations: dict[int, Relation]) -> Change:
    oid = buf.take(">I")
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
            values[column.name] = buf.raw(length).decode(buf.encoding)
        else:
            raise PgOutputError(f"unknown tuple value kind {kind!r} (binary mode is not used)")
    return values


def parse_lsn(text: str) -> int:
    high, _, low = str(text).partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"
