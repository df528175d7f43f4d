"""Statements as the binlog logs them, classified: which captured tables one changes, and how.

A binlog holds a change as rows only when the session that made it logged rows. Everything
else it holds as the statement's text (a ``QueryEvent``): DDL always, TRUNCATE always, and DML
of a session with ``binlog_format = STATEMENT`` (or MIXED). MySQL-CDC reads rows, so each such
statement of a captured table needs a decision: an ALTER is followed (ddl.py, shapes.py), a
TRUNCATE, DROP or statement-logged DML fails the stream (binlog.py), and the planner starts a
batch at each DDL (batch_end.py). The reader and the planner must agree on which statement is
which, so both ask ``classify`` here, never a pattern of their own: a pattern anchored at the
start missed ``/* app */ TRUNCATE t``, and one without ``ONLINE`` missed ``ALTER ONLINE TABLE``.

Comments are dropped (``/* */``, ``-- ``, ``#``) except versioned ones (``/*! ... */``,
``/*M! ... */``), whose text the server executes. Names may be quoted and qualified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DML, TRUNCATE, DROP, ALTER, RENAME, CREATE = "dml", "truncate", "drop", "alter", "rename", "create"
DDL = frozenset({DROP, ALTER, RENAME, CREATE, TRUNCATE})

_TOKEN = re.compile(r"""\s+|/\*M?!\d*|\*/|/\*.*?\*/|--[^\n]*|\#[^\n]*|`(?:[^`]|``)*`|'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"
                        |[A-Za-z0-9_$@]+|[(),.=;]|\S""", re.X | re.S)


@dataclass(frozen=True)
class Token:
    text: str

    @property
    def word(self) -> str:
        return self.text.upper()

    @property
    def name(self) -> str:
        """As an identifier: unquoted."""
        if self.text.startswith("`"):
            return self.text[1:-1].replace("``", "`")
        return self.text


def tokens(statement: str) -> list[Token]:
    """The statement's tokens without whitespace and comments (a versioned comment's text counts)."""
    out = []
    for match in _TOKEN.finditer(statement or ""):
        text = match.group(0)
        if text.isspace() or text.startswith(("--", "#")) or (text.startswith("/*") and not text.startswith(("/*!", "/*M!"))):
            continue
        if text.startswith(("/*!", "/*M!")) or text == "*/":
            continue
        out.append(Token(text))
    return out


@dataclass(frozen=True)
class Statement:
    """What a logged statement does: ``kind`` (None: nothing this module tells apart) to ``tables``,
    each ``(database, table)``; ``(database, None)`` stands for every table of the database."""

    kind: str | None
    tables: tuple[tuple[str | None, str | None], ...] = ()

    def renamed_away(self, captured) -> list:
        """RENAME: the keys of ``captured`` it renames without naming another table to them (a
        swap in one statement, ``RENAME TABLE t TO t_old, t_new TO t``, keeps the name)."""
        if self.kind != RENAME:
            return []
        olds, news = self.tables[0::2], {_folded(key) for key in self.tables[1::2]}
        return [key for key in captured for old in olds if _folded(key) == _folded(old) and _folded(key) not in news]

    def names(self, captured) -> list:
        """The keys of ``captured`` (``(database, table)`` keys) it names, in its order. A statement
        the stream refuses matches names whatever their case too (a server with
        lower_case_table_names logs them as typed): refusing one more is the safe side, while an
        ALTER applied to the wrong table would misread it."""
        folded = self.kind not in (ALTER, CREATE)
        out = []
        for database, table in self.tables:
            for key in captured:
                wanted = (database, key[1] if table is None else table)     # None: every table of it
                if key not in out and (key == wanted or folded and _folded(key) == _folded(wanted)):
                    out.append(key)
        return out


def _folded(key: tuple) -> tuple:
    return tuple(None if part is None else part.casefold() for part in key)


NONE = Statement(None)
_DML = {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"}
_SKIP = {"LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "INTO", "CONCURRENT", "LOCAL"}
_JOIN = {"JOIN", "STRAIGHT_JOIN"}
_DERIVED = {"SELECT", "WITH", "VALUES", "TABLE"}     # what opens a derived table's query
_REFS_END = {"SET", "WHERE", "USING", "ORDER", "LIMIT", "RETURNING", "FROM", "VALUES", "VALUE", "SELECT"}


def classify(statement: str, default_database: str | None) -> Statement:
    """What ``statement``, logged with default database ``default_database``, does to which tables."""
    toks = [t for t in tokens(statement) if t.text != ";"]
    try:
        return _classify(toks, default_database)
    except IndexError:              # cut short: not a statement the server logged
        return NONE


def _classify(toks: list[Token], db: str | None) -> Statement:
    first = toks[0].word if toks else ""
    if first == "WITH":             # a common table expression before the DML (MySQL 8)
        at = _skip_parens(toks, 1, stop=_DML)
        return _dml(toks, at, db) if at < len(toks) else NONE
    if first in _DML:
        return _dml(toks, 0, db)
    if first == "TRUNCATE":
        at = 2 if len(toks) > 1 and toks[1].word == "TABLE" else 1
        return Statement(TRUNCATE, (_name(toks, at, db)[0],))
    if first == "ALTER":
        at = _after(toks, 1, {"ONLINE", "IGNORE"})
        if toks[at].word != "TABLE":
            return NONE
        return Statement(ALTER, (_name(toks, _after(toks, at + 1, {"IF", "EXISTS"}), db)[0],))
    if first == "RENAME" and toks[1].word in ("TABLE", "TABLES"):
        return Statement(RENAME, tuple(_name_list(toks, 2, db, {"TO", ",", "WAIT", "NOWAIT"})))
    if first == "DROP":
        at = _after(toks, 1, {"TEMPORARY"})
        if toks[at].word in ("TABLE", "TABLES") and at == 1:
            return Statement(DROP, tuple(_name_list(toks, _after(toks, 2, {"IF", "EXISTS"}), db, {","})))
        if toks[1].word in ("DATABASE", "SCHEMA"):
            return Statement(DROP, ((toks[_after(toks, 2, {"IF", "EXISTS"})].name, None),))
        return NONE                 # a temporary table's drop, an index's, a view's: no captured rows go
    if first == "CREATE":
        replacing = toks[1].word == "OR" and toks[2].word == "REPLACE"
        at = 3 if replacing else 1
        if toks[at].word != "TABLE":
            return NONE             # temporary tables, views, indexes
        table = _name(toks, _after(toks, at + 1, {"IF", "NOT", "EXISTS"}), db)[0]
        return Statement(DROP if replacing else CREATE, (table,))   # OR REPLACE drops the table it replaces
    return NONE


def _dml(toks: list[Token], at: int, db: str | None) -> Statement:
    verb = toks[at].word
    if verb == "LOAD":              # LOAD DATA|XML ... INFILE 'f' [REPLACE|IGNORE] INTO TABLE t
        at = next(i for i in range(at, len(toks)) if toks[i].word == "TABLE") + 1
        return Statement(DML, (_name(toks, at, db)[0],))
    at = _after(toks, at + 1, _SKIP)
    if verb in ("INSERT", "REPLACE"):
        return Statement(DML, (_name(toks, at, db)[0],))
    if verb == "DELETE" and toks[at].word != "FROM":        # DELETE t1, t2 FROM refs: the named targets
        targets = _refs(toks, at, db)
        at = next(i for i in range(at, len(toks)) if toks[i].word == "FROM") + 1
        return Statement(DML, tuple(targets + _refs(toks, at, db)))
    if verb == "DELETE":
        at += 1
    return Statement(DML, tuple(_refs(toks, at, db)))      # UPDATE refs SET / DELETE FROM refs [USING refs]


def _refs(toks: list[Token], at: int, db: str | None) -> list:
    """The tables of a table reference list from ``at`` (each after the start, a comma or a JOIN),
    until the clause that ends it. A table only read in a join is named too: a statement-logged
    change is refused, and refusing one that only read a captured table is the safe side."""
    out, expect = [], True
    while at < len(toks):
        tok = toks[at]
        if tok.word == "USING" and at + 1 < len(toks) and toks[at + 1].text == "(":   # a join's columns
            at, expect = _skip_parens(toks, at + 1), False
            continue
        if tok.word in _REFS_END:
            break
        if tok.text == "(":
            end = _skip_parens(toks, at)
            inner = toks[at + 1:end - 1]
            # where a table reference starts, ``(t)`` or ``(t1 JOIN t2 ...)`` names tables (review 30,
            # F4: ``JOIN (orders)`` was passed over); a derived table's query only reads
            if expect and inner and inner[0].word not in _DERIVED:
                out += _refs(inner, 0, db)
            at, expect = end, False
            continue
        if expect and (tok.text.startswith("`") or tok.text[:1].isalnum() or tok.text[:1] in "_$"):
            name, at = _name(toks, at, db)
            if at < len(toks) and toks[at].text == "." and toks[at + 1].text == "*":   # t.* (multi-table DELETE)
                at += 2
            out.append(name)
            expect = False
            continue
        expect = tok.text == "," or tok.word in _JOIN
        at += 1
    if at < len(toks) and toks[at].word == "USING":
        out += _refs(toks, at + 1, db)
    return out


def _name_list(toks: list[Token], at: int, db: str | None, separators: set) -> list:
    out = []
    while at < len(toks):
        if toks[at].word in separators or toks[at].text in separators:
            at += 1
            continue
        if toks[at].word in ("RESTRICT", "CASCADE", "FORCE") or toks[at].text.isdigit():
            break
        name, at = _name(toks, at, db)
        out.append(name)
    return out


def _name(toks: list[Token], at: int, db: str | None) -> tuple[tuple[str | None, str], int]:
    """A table name at ``at``, qualified or not, and where it ends."""
    if at + 2 < len(toks) and toks[at + 1].text == "." and toks[at + 2].text != "*":
        return (toks[at].name, toks[at + 2].name), at + 3
    return (db, toks[at].name), at + 1


def _after(toks: list[Token], at: int, words: set) -> int:
    while at < len(toks) and toks[at].word in words:
        at += 1
    return at


def _skip_parens(toks: list[Token], at: int, stop: set | None = None) -> int:
    """With ``stop``: the first of those words outside parentheses from ``at``; without: the
    token after the parenthesized group that starts at ``at``."""
    depth = 0
    while at < len(toks):
        text = toks[at].text
        depth += (text == "(") - (text == ")")
        if stop is None and depth == 0:
            return at + 1
        if stop is not None and depth == 0 and toks[at].word in stop:
            return at
        at += 1
    return at


def touched(statement: str, default_database: str | None, captured, kinds=None) -> tuple[Statement, list]:
    """The statement's class and the keys of ``captured`` it names (only of ``kinds``, if given)."""
    found = classify(statement, default_database)
    if found.kind is None or (kinds is not None and found.kind not in kinds):
        return found, []
    return found, found.names(captured)
