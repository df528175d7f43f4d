"""A binlog row's key in the form the server compares exactly, for reading the row by it.

The binlog decoder gives some key types in another form than the one the server stores and the
client reads back (binlog_values): ENUM as its index, SET as its bits, BIT as a string of bits, FLOAT
as the float widened to a double; and, without binlog_row_metadata = FULL, an unsigned integer
past the signed range as a negative number. A row read by such a key was missed: the server's answer ('b',
b'\\x00\\x05', 0.123457) never equalled the key it was asked for (2, '0000000101',
0.12345670163631439), so the row's left-out columns were written null, silently and for good.

So each key column is compared through a number both sides hold exactly: the WHERE gives the
binlog's value as that number against the bare column (the server compares an ENUM or SET with a
number by index or bits, a BIT by its value, a FLOAT with a double as a double; the bare column
keeps the key's index in use), and the row read back carries the column through an expression of
the same number (``+ 0``; ``+ 0e0`` for FLOAT, whose text in the client's answer has six digits and
is not the stored value), which is what a row is matched to its key by. Other types arrive in the
stored form already (BINARY(n) is padded to its width in binlog_values), and are compared bare;
an unsigned integer read negative is given its value back first.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from seatide.connectors.mysql_cdc.columns import UNSIGNED_BITS, quoted_values
from seatide.connectors.mysql_cdc.snapshot import quote

_NUMBERED = {"enum", "set", "bit"}


def key_positions(table) -> list[int]:
    """Where the key's columns are in a row of ``table`` (a CapturedTable)."""
    names = [row[0] for row in table.described]
    return [names.index(k) for k in table.key]


def key_of(table, row: Sequence) -> tuple:
    return tuple(row[p] for p in key_positions(table))


def read_back(table) -> list[str]:
    """Per key column, the SQL expression whose value a row read by key is matched with."""
    return [f"{quote(name)} + 0e0" if kind == "float" else f"{quote(name)} + 0" if kind in _NUMBERED
            else quote(name) for name, kind, _ in _key_types(table)]


def compared(table) -> list[Callable[[Any], Any]]:
    """Per key column, the binlog value (as binlog_values gives it) -> the value the WHERE gives and
    ``read_back`` returns."""
    forms = []
    for _, kind, column_type in _key_types(table):
        if kind in _NUMBERED:
            forms.append(_numbered(kind, quoted_values(column_type)))
        elif kind in UNSIGNED_BITS and "unsigned" in column_type.lower():
            forms.append(_unsigned(UNSIGNED_BITS[kind]))
        else:
            forms.append(_same)
    return forms


def _key_types(table) -> list[tuple[str, str, str]]:
    """(name, DATA_TYPE, COLUMN_TYPE) of each key column."""
    rows = {row[0]: row for row in table.described}
    return [(name, str(rows[name][1]).lower(), str(rows[name][2])) for name in table.key]


def _unsigned(bits: int) -> Callable[[Any], Any]:
    """Logged without column metadata, an unsigned integer past the signed range reads negative."""
    return lambda value: value + (1 << bits) if isinstance(value, int) and value < 0 else value


def _same(value: Any) -> Any:
    return value


def _numbered(kind: str, members: list[str]) -> Callable[[Any], Any]:
    def number(value: Any) -> Any:
        if isinstance(value, int) or value is None:
            return value
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "big")
        if kind == "bit":                       # the decoder's "0000000101"
            return int(value or "0", 2)
        if kind == "enum":
            return members.index(value) + 1 if value in members else 0
        if isinstance(value, str):              # a SET's "x,z"
            value = set(value.split(",")) if value else set()
        return sum(1 << i for i, member in enumerate(members) if member in value)
    return number
