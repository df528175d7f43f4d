"""ALTER TABLE statements as the binlog logs them, read into the column changes they make.

The binlog holds a DDL statement as its text (a ``QueryEvent``) between the rows before it and
the rows after it: it is the one record of what the table looked like at that point of the
stream (the server's own description is of *now*, which may be several changes further). So
MySQL-CDC follows a captured table's shape by applying each ALTER TABLE to the shape it kept,
in binlog order, as Debezium does (docs/design/multi-table.md, *Schema evolution*).

Only what changes the columns is read: ADD [COLUMN] (one, or several in parentheses; FIRST /
AFTER), DROP [COLUMN], RENAME COLUMN a TO b, CHANGE [COLUMN] old new type, MODIFY [COLUMN],
any number of them comma-separated. Indexes, keys, constraints, partitions, defaults and table
options change no column and are passed over (a column's own DEFAULT and NOT NULL are read with
its definition: the target gets the column as the source has it). Anything else raises ``UnknownDdl`` with the
clause: a shape is never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seatide.connectors.mysql_cdc.statements import ALTER, classify
from seatide.connectors.mysql_cdc.statements import Token as _Tok
from seatide.connectors.mysql_cdc.statements import tokens as _tokens

ADD, DROP, RENAME, REDEFINE = "add", "drop", "rename", "redefine"


class UnknownDdl(ValueError):
    """A statement (or one clause of it) whose effect on the columns is not known."""


@dataclass(frozen=True)
class ColumnDef:
    """A column definition: its name and type as the statement writes them."""

    name: str
    type_text: str                   # lower case, as written: "decimal(12,3)", "int unsigned"
    data_type: str                   # the base type, as information_schema's DATA_TYPE: "decimal"
    charset: str | None = None       # CHARACTER SET given in the statement
    not_null: bool = False           # NOT NULL (or PRIMARY KEY)
    default: tuple | None = None     # DEFAULT, as ``column_default`` reads it (None: none, or NULL)


@dataclass(frozen=True)
class ColumnChange:
    kind: str                        # ADD, DROP, RENAME or REDEFINE
    column: str                      # the column (ADD: the new one; others: its name before)
    new_name: str | None = None      # RENAME, and REDEFINE by CHANGE
    definition: ColumnDef | None = None     # ADD, REDEFINE
    place: tuple | None = None       # ("first",) or ("after", column): where ADD/REDEFINE puts it
    if_exists: bool = False          # IF [NOT] EXISTS: nothing to do when it does not apply


@dataclass(frozen=True)
class AlterTable:
    database: str | None
    table: str
    changes: tuple[ColumnChange, ...]


def altered_table(statement: str, default_database: str | None) -> tuple[str | None, str] | None:
    """The (database, table) an ALTER TABLE statement alters; None for any other statement."""
    found = classify(statement, default_database)
    return found.tables[0] if found.kind == ALTER else None


def _header(tokens: list[_Tok], default_database: str | None) -> tuple[tuple[str | None, str], int]:
    at = 0
    while tokens[at].word in ("ALTER", "ONLINE", "IGNORE", "TABLE"):
        at += 1
    if [t.word for t in tokens[at:at + 2]] == ["IF", "EXISTS"]:
        at += 2
    first = tokens[at].name
    if at + 2 < len(tokens) and tokens[at + 1].text == ".":
        return (first, tokens[at + 2].name), at + 3
    return (default_database, first), at + 1


def parse_alter(statement: str, default_database: str | None = None) -> AlterTable:
    """The column changes of an ALTER TABLE statement, in the order it makes them."""
    try:
        return _parse_alter(statement, default_database)
    except IndexError:
        raise UnknownDdl("a statement cut short") from None


def _parse_alter(statement: str, default_database: str | None) -> AlterTable:
    tokens = [t for t in _tokens(statement) if t.text != ";"]
    (database, table), at = _header(tokens, default_database)
    if at < len(tokens) and tokens[at].word in ("WAIT", "NOWAIT"):
        at += 2 if tokens[at].word == "WAIT" else 1
    changes: list[ColumnChange] = []
    for clause in _split(tokens[at:]):
        changes += _clause(clause)
    return AlterTable(database, table, tuple(changes))


def _split(tokens: list[_Tok]) -> list[list[_Tok]]:
    """Top-level comma-separated clauses."""
    clauses, current, depth = [], [], 0
    for token in tokens:
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        if token.text == "," and depth == 0:
            clauses.append(current)
            current = []
        else:
            current.append(token)
    if current:
        clauses.append(current)
    return clauses


# Clauses that change no column: keys, constraints, partitions, table options
_KEYS = {"INDEX", "KEY", "UNIQUE", "PRIMARY", "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK",
         "PARTITION", "PERIOD", "SYSTEM"}
_OPTIONS = {"ENGINE", "AUTO_INCREMENT", "COMMENT", "ROW_FORMAT", "KEY_BLOCK_SIZE", "AVG_ROW_LENGTH", "MAX_ROWS",
            "MIN_ROWS", "PACK_KEYS", "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "CHECKSUM",
            "PAGE_CHECKSUM", "DELAY_KEY_WRITE", "ALGORITHM", "LOCK", "FORCE", "ORDER", "ENABLE", "DISABLE",
            "DISCARD", "IMPORT", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
            "REPAIR", "TRUNCATE", "REMOVE", "UPGRADE", "WITH", "WITHOUT", "TRANSACTIONAL", "ENCRYPTION",
            "ENCRYPTION_KEY_ID", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "IETF_QUOTES", "SECONDARY_ENGINE",
            "INSERT_METHOD", "DATA", "INDEX", "TABLESPACE", "STORAGE", "UNION", "PARTITION"}


def _clause(tokens: list[_Tok]) -> list[ColumnChange]:
    words = [t.word for t in tokens]
    head = words[0] if words else ""
    text = " ".join(t.text for t in tokens)
    if head == "ADD":
        return _add(tokens[1:], text)
    if head == "DROP":
        rest = tokens[1:]
        if rest and rest[0].word in _KEYS | {"DEFAULT"}:
            return []
        if rest and rest[0].word == "COLUMN":
            rest = rest[1:]
        if_exists = [t.word for t in rest[:2]] == ["IF", "EXISTS"]
        rest = rest[2:] if if_exists else rest
        if len(rest) == 1 or (len(rest) == 2 and rest[1].word in ("RESTRICT", "CASCADE")):
            return [ColumnChange(DROP, rest[0].name, if_exists=if_exists)]
    elif head == "RENAME":
        if len(words) == 5 and words[1] == "COLUMN" and words[3] == "TO":
            return [ColumnChange(RENAME, tokens[2].name, tokens[4].name)]
        if len(words) == 5 and words[1] in ("INDEX", "KEY") and words[3] == "TO":
            return []
    elif head == "CHANGE":
        rest = tokens[2:] if words[1:2] == ["COLUMN"] else tokens[1:]
        if_exists = [t.word for t in rest[:2]] == ["IF", "EXISTS"]
        rest = rest[2:] if if_exists else rest
        if len(rest) >= 3:
            definition, place = _definition(rest[1:], text)
            return [ColumnChange(REDEFINE, rest[0].name, definition.name, definition, place, if_exists)]
    elif head == "MODIFY":
        rest = tokens[2:] if words[1:2] == ["COLUMN"] else tokens[1:]
        if_exists = [t.word for t in rest[:2]] == ["IF", "EXISTS"]
        rest = rest[2:] if if_exists else rest
        if len(rest) >= 2:
            definition, place = _definition(rest, text)
            return [ColumnChange(REDEFINE, definition.name, None, definition, place, if_exists)]
    elif head == "ALTER":
        # ALTER [COLUMN] c SET/DROP DEFAULT, SET [IN]VISIBLE; ALTER INDEX/CHECK/CONSTRAINT ...
        rest = words[2:] if words[1:2] == ["COLUMN"] else words[1:]
        if words[1:2] and words[1] in _KEYS or rest[1:3] in (["SET", "DEFAULT"], ["DROP", "DEFAULT"],
                                                             ["SET", "VISIBLE"], ["SET", "INVISIBLE"]):
            return []
    elif head in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE") and "CONVERT" not in words:
        return []          # the table's default for columns added later, which name theirs in the binlog
    elif head in _OPTIONS:
        return []
    raise UnknownDdl(f"the clause '{text}'")


def _add(tokens: list[_Tok], text: str) -> list[ColumnChange]:
    column = bool(tokens) and tokens[0].word == "COLUMN"
    rest = tokens[1:] if column else tokens
    if not column and rest and rest[0].word in _KEYS:
        return []
    if_exists = [t.word for t in rest[:3]] == ["IF", "NOT", "EXISTS"]
    rest = rest[3:] if if_exists else rest
    if rest and rest[0].text == "(" and rest[-1].text == ")":
        changes = []
        for part in _split(rest[1:-1]):
            if part and part[0].word in _KEYS:
                raise UnknownDdl(f"the clause '{text}' (a key among the columns added)")
            definition, place = _definition(part, text)
            changes.append(ColumnChange(ADD, definition.name, None, definition, place, if_exists))
        return changes
    definition, place = _definition(rest, text)
    return [ColumnChange(ADD, definition.name, None, definition, place, if_exists)]


_MULTI = {("DOUBLE", "PRECISION"): "double", ("CHARACTER", "VARYING"): "varchar", ("CHAR", "VARYING"): "varchar",
          ("NATIONAL", "CHAR"): "char", ("NATIONAL", "VARCHAR"): "varchar", ("NATIONAL", "CHARACTER"): "char",
          ("LONG", "VARCHAR"): "mediumtext", ("LONG", "VARBINARY"): "mediumblob", ("NCHAR", "VARCHAR"): "varchar"}
_ALIASES = {"integer": "int", "int4": "int", "int8": "bigint", "int2": "smallint", "int1": "tinyint",
            "int3": "mediumint", "middleint": "mediumint", "dec": "decimal", "numeric": "decimal",
            "fixed": "decimal", "real": "double", "float8": "double", "float4": "float", "character": "char",
            "nchar": "char", "nvarchar": "varchar", "long": "mediumtext", "bool": "tinyint", "boolean": "tinyint"}
_FLAGS = {"UNSIGNED", "SIGNED", "ZEROFILL"}


def _definition(tokens: list[_Tok], text: str) -> tuple[ColumnDef, tuple | None]:
    """``name type [attributes] [FIRST | AFTER c]``."""
    if len(tokens) < 2 or tokens[1].text in ("(", ",", "="):
        raise UnknownDdl(f"the column definition in '{text}'")
    name, at = tokens[0].name, 1
    pair = tuple(t.word for t in tokens[at:at + 2])
    if pair in _MULTI:
        base, at = _MULTI[pair], at + 2
    else:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", tokens[at].text):
            raise UnknownDdl(f"the type of column {name} in '{text}'")
        base, at = _ALIASES.get(tokens[at].text.lower(), tokens[at].text.lower()), at + 1
    boolean = tokens[at - 1].word in ("BOOL", "BOOLEAN")
    args = ""
    if at < len(tokens) and tokens[at].text == "(":
        depth, start = 0, at
        while at < len(tokens):
            depth += {"(": 1, ")": -1}.get(tokens[at].text, 0)
            at += 1
            if depth == 0:
                break
        args = "".join(t.text for t in tokens[start:at])
    flags = []
    while at < len(tokens) and tokens[at].word in _FLAGS:
        flags.append(tokens[at].text.lower())
        at += 1
    rest = [t.word for t in tokens[at:]]
    charset = None
    for i, word in enumerate(rest):
        if word == "CHARSET" or (word == "CHARACTER" and rest[i + 1:i + 2] == ["SET"]):
            value = tokens[at + i + (1 if word == "CHARSET" else 2)]
            value = tokens[at + i + (2 if word == "CHARSET" else 3)] if value.text == "=" else value
            charset = value.name.strip("'\"").lower()
    not_null = _not_null(rest)
    default = _default(tokens[at:])
    place = None
    if rest and rest[-1] == "FIRST":
        place = ("first",)
    elif len(rest) >= 2 and rest[-2] == "AFTER":
        place = ("after", tokens[-1].name)
    args = args if base in ("enum", "set") else args.lower()
    type_text = "tinyint(1)" if boolean else base + args + "".join(" " + f for f in flags)
    return ColumnDef(name, type_text, base, charset, not_null, default), place


def _not_null(words: list[str]) -> bool:
    pairs = list(zip(words, words[1:]))
    return ("NOT", "NULL") in pairs or ("PRIMARY", "KEY") in pairs or "SERIAL" in words


# Words that end a column's DEFAULT value: the attributes that may follow it
_ATTRIBUTES = {"NOT", "NULL", "DEFAULT", "AUTO_INCREMENT", "PRIMARY", "KEY", "UNIQUE", "COMMENT", "COLLATE",
               "CHARACTER", "CHARSET", "ON", "FIRST", "AFTER", "INVISIBLE", "VISIBLE", "CHECK", "REFERENCES",
               "GENERATED", "AS", "COLUMN_FORMAT", "STORAGE", "SERIAL", "COMPRESSED", "PERSISTENT", "VIRTUAL",
               "STORED", "WITHOUT", "WITH", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "REF_SYSTEM_ID"}


def _default(tokens: list[_Tok]) -> tuple | None:
    """The value after DEFAULT, as ``column_default`` reads it."""
    words = [t.word for t in tokens]
    if "DEFAULT" not in words:
        return None
    at = words.index("DEFAULT") + 1
    end, depth = at, 0
    while end < len(tokens) and (end == at or depth > 0 or tokens[end].word not in _ATTRIBUTES):
        depth += {"(": 1, ")": -1}.get(tokens[end].text, 0)
        end += 1
    value = tokens[at:end]
    if len(value) == 2 and value[1].text.startswith("'"):
        if value[0].text.startswith("_"):
            value = value[1:]                              # a character set introducer: _utf8mb4'x'
        elif value[0].word in ("B", "X", "N"):             # b'101', x'ff', N'text': one literal
            return column_default(value[0].text + value[1].text)
    return column_default(" ".join(t.text for t in value))


_NOW = re.compile(r"\(?\s*(current_timestamp|now|localtime|localtimestamp)\s*(?:\(\s*(\d*)\s*\))?\s*\)?", re.I)
_NUMBER = re.compile(r"[-+]?\s*(\d+(\s*\.\s*\d*)?|\.\s*\d+)([eE]\s*[-+]?\s*\d+)?")
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def column_default(text: str | None, quoted: bool = True) -> tuple | None:
    """A column's default as a statement or the server writes it: ("literal", value) for a string or
    number, ("now", fractional digits or None) for CURRENT_TIMESTAMP and its synonyms, ("expression",
    text) for anything else; None for none or NULL. ``quoted``: string values are in quotes (a
    statement; MariaDB's information_schema), else they are bare (MySQL's)."""
    if text is None:
        return None
    text = text.strip()
    if text.upper() == "NULL":
        return None
    now = _NOW.fullmatch(text)
    if now:
        return ("now", int(now.group(2)) if now.group(2) else None)
    if text.startswith("'") and text.endswith("'") and len(text) > 1:
        return ("literal", re.sub(r"''|\\(.)", lambda m: "'" if m.group(0) == "''"
                                  else _ESCAPES.get(m.group(1), m.group(1)), text[1:-1]))
    if _NUMBER.fullmatch(text):
        return ("literal", re.sub(r"\s+", "", text))
    return ("literal", text) if not quoted else ("expression", text)


_WIDTH = re.compile(r"^(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)")


def same_type(statement_type: str, server_type: str) -> bool:
    """Whether the server's COLUMN_TYPE is the type the statement wrote (aliases, spacing and an
    integer's display width aside: MariaDB shows INT as int(11))."""
    def canonical(text: str) -> str:
        text = re.sub(r"\s+", " ", text.strip().lower()).replace(" (", "(").replace(", ", ",")
        text = re.sub(r"\bzerofill\b", "zerofill", text).replace(" signed", "")
        if text.startswith("tinyint(1)"):
            return text
        text = _WIDTH.sub(r"\1", text)
        if text.startswith("decimal") and "(" not in text.split(" ")[0]:
            text = text.replace("decimal", "decimal(10,0)", 1)
        text = re.sub(r"^decimal\((\d+)\)", r"decimal(\1,0)", text)
        text = re.sub(r"^(char|binary)(?=$| )", r"\1(1)", text)
        return text
    return canonical(statement_type) == canonical(server_type)


__all__ = ["ADD", "DROP", "RENAME", "REDEFINE", "AlterTable", "ColumnChange", "ColumnDef", "UnknownDdl",
           "altered_table", "column_default", "parse_alter", "same_type"]
