"""Binlog values in the form the snapshot's client gives them, whatever the row metadata.

The binlog decoder (mysql-replication) knows a column's charset and its ENUM and SET values
only from the optional metadata a server logs with ``binlog_row_metadata = FULL``. MySQL 8
logs MINIMAL by default and MariaDB NO_LOG; without the metadata the decoder reads every
string and blob as strict UTF-8 (a ``mediumblob`` fails with UnicodeDecodeError, a latin1
text too) and every ENUM and SET as None. So before a row event's rows are decoded, its
columns are set up the same way under every setting:

* string and blob columns decode as ISO-8859-1, which maps each byte to one character and
  back: ``raw_value`` recovers the exact bytes and decodes text with the column's own charset
  from ``information_schema`` (``CHARACTER_SET_NAME``; a binary column stays bytes);
* ENUM columns yield their index and SET columns their bits, which ``columns.py`` turns into
  the values listed in the column's type, as it does for an index from any client.

An empty SET, which the decoder reports as None, becomes ''.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from pymysql.charset import charset_by_name

_BYTE_FOR_BYTE = "iso-8859-1"   # no MySQL charset has this name, so the decoder uses the codec
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
EMPTY_SET = "empty set"         # the decoder's none_sources reason for an empty SET value
LEFT_OUT = "cols bitmap"        # ... for a column the row image left out (binlog_row_image != FULL)


def prepare(columns) -> None:
    """Set up a row event's columns (mysql-replication's, shared with its table map) before
    its rows are decoded."""
    from pymysqlreplication.constants import FIELD_TYPE

    strings = {FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB}
    for column in columns:
        if column.type in strings:
            column.character_set_name = _BYTE_FOR_BYTE
        elif column.type == FIELD_TYPE.ENUM:
            column.enum_values = range(1 << 16)          # the value read is its own index
        elif column.type == FIELD_TYPE.SET:
            column.set_values = [1 << i for i in range(64)]   # members come back as their bits


def raw_converter(data_type: str, charset: str | None, column_type: str = "") -> Callable[[Any], Any]:
    """From the decoder's value of a column (``information_schema`` DATA_TYPE, charset and
    COLUMN_TYPE) to the value PyMySQL returns for it in the snapshot."""
    base = data_type.lower()
    if base == "binary":        # logged without its trailing zero bytes, stored and read with them
        return _padded(column_type)
    if base in ("enum",):
        return lambda v: v
    if base == "set":
        return lambda v: sum(v) if isinstance(v, (set, frozenset)) else v
    if base in _TEXT_TYPES and charset and charset.lower() != "binary":
        codec = _codec(charset)
        return lambda v: _decoded(v, codec) if isinstance(v, str) else v
    if base in _TEXT_TYPES or base in _BINARY_TYPES:
        return lambda v: v.encode(_BYTE_FOR_BYTE) if isinstance(v, str) else v
    return lambda v: v


def _padded(column_type: str) -> Callable[[Any], Any]:
    found = re.search(r"\((\d+)\)", column_type)
    width = int(found.group(1)) if found else 1

    def pad(value: Any) -> Any:
        if isinstance(value, str):
            value = value.encode(_BYTE_FOR_BYTE)
        return bytes(value).ljust(width, b"\0") if isinstance(value, (bytes, bytearray)) else value
    return pad


def _codec(charset: str) -> str:
    found = charset_by_name(charset.lower())
    encoding = found.encoding if found else charset
    return {"binary": _BYTE_FOR_BYTE}.get(encoding, encoding)


def _decoded(value: str, codec: str) -> str:
    raw = value.encode(_BYTE_FOR_BYTE)
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        if codec == "cp1252":      # MySQL's latin1 also has the five bytes cp1252 leaves undefined
            return raw.decode(_BYTE_FOR_BYTE)
        raise


# information_schema DATA_TYPE -> the binlog column types a table map may give it. A type
# not listed (one a server added) is not compared.
_BINLOG_TYPES = {
    "tinyint": {1}, "smallint": {2}, "mediumint": {9}, "int": {3}, "integer": {3}, "bigint": {8},
    "float": {4}, "double": {5}, "real": {5}, "decimal": {246}, "numeric": {246},
    "date": {10, 14}, "time": {11, 19}, "datetime": {12, 18}, "timestamp": {7, 17}, "year": {13},
    "char": {254}, "binary": {254}, "varchar": {15, 253}, "varbinary": {15, 253},
    "tinytext": {252}, "text": {252}, "mediumtext": {252}, "longtext": {252},
    "tinyblob": {252}, "blob": {252}, "mediumblob": {252}, "longblob": {252}, "json": {245, 252},
    "enum": {247, 254}, "set": {248, 254}, "bit": {16},
    "geometry": {255}, "point": {255}, "linestring": {255}, "polygon": {255}, "multipoint": {255},
    "multilinestring": {255}, "multipolygon": {255}, "geometrycollection": {255},
}


def retyped_by_name(described: tuple, layout) -> str | None:
    """A column of a table map (named: binlog_row_metadata = FULL) whose type is not the one the
    column of that name has in ``described``, or None."""
    rows = {row[0]: row for row in described}
    for column in layout.columns:
        row = rows.get(column.name)
        if row is None:
            return f"column {column.name} is new"
        difference = _type_difference(row, column)
        if difference:
            return f"column {column.name} {difference}"
    return None


def _type_difference(row: tuple, column) -> str | None:
    data_type = str(row[1]).lower()
    expected = _BINLOG_TYPES.get(data_type)
    if expected is not None and column.type not in expected:
        return f"({data_type}) now holds a value of another type"
    if data_type in ("decimal", "numeric") and hasattr(column, "precision") and row[3] is not None \
            and (column.precision, column.decimals) != (row[3], row[4]):
        return f"is now decimal({column.precision},{column.decimals})"
    return None


def layout_difference(described: tuple, layout) -> str | None:
    """How a table map (mysql-replication's Table) differs from the columns the job started
    with, or None. Types are compared always, names when the binlog logged them itself
    (binlog_row_metadata = FULL): names the decoder looked up are the table's current ones."""
    columns = layout.columns
    if len(columns) != len(described):
        return f"it has {len(columns)} columns, the table had {len(described)}"
    for position, (row, column) in enumerate(zip(described, columns), start=1):
        name, data_type = row[0], str(row[1]).lower()
        difference = _type_difference(row, column)
        if difference:
            return f"column {position} ({name}, {data_type}) {difference}"
        if getattr(layout, "column_name_flag", False) and column.name and column.name != name:
            return f"column {position} ({name}) is now called {column.name}"
    return None
