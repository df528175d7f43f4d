"""A save-mode step's statement: whether a DDL ``custom_sql`` can run under LOCK TABLES, known when
the job is loaded, and whether the server's refusal of a step is one no retry can pass.

On MySQL/MariaDB a DDL ``custom_sql`` runs with the target table and its commit records locked
(``save_modes._lock_tables``), after the store recorded the decision. There MariaDB refuses a
statement that names any other table (error 1100: ``CREATE TABLE ... LIKE``, ``TRUNCATE`` of
another table) and some statements outright (1192: ``RENAME TABLE``), and the sink sends one
statement (1064 for a second). Such a statement failed after the decision, and every retry of the
job failed the same way (outside review, R-D). So only statements known to run there are
accepted, each on the target table alone; anything else is refused with the job's options, before
anything is asked or destroyed. Conservative: a statement refused here may have run, none accepted
here is refused by the lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A token: whitespace and comments (skipped), a MariaDB executable comment's opening or closing
# (skipped: its statement is run), a quoted name or string, a word, or one character.
_TOKEN = re.compile(r"""(?P<skip>\s+|/\*(?!M?!).*?\*/|(?:--(?=\s)|\#)[^\n]*|/\*M?!\d*|\*/)
                        |(?P<name>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
                        |(?P<word>\w+)|(?P<other>.)""", re.VERBOSE | re.DOTALL)
_OTHER_TABLE = "it names a table other than the target, which is not locked (MariaDB error 1100)"


@dataclass(frozen=True)
class LockedStatement:
    """A DDL ``custom_sql`` that runs under LOCK TABLES on its target: what it is, and the
    privilege MariaDB asks of the user for it (``privileges.needs``)."""

    what: str           # "TRUNCATE", "ALTER TABLE", "DROP TABLE", "CREATE INDEX", "DROP INDEX"
    privilege: str


class NotUnderLock(ValueError):
    """A DDL ``custom_sql`` that LOCK TABLES forbids, or that SeaTide cannot tell runs there; says why."""


def locked_statement(sql: str, table: tuple[str, ...], connected_to: str | None) -> LockedStatement:
    """What ``sql`` is, run under LOCK TABLES on ``table`` (as the sink names it: (database, name)
    or (name,)) through a connection to ``connected_to``; raises ``NotUnderLock`` saying why not."""
    words = _tokens(sql)
    if _upper(words[:2]) == ["SET", "STATEMENT"]:       # SET STATEMENT var=value, ... FOR <statement>
        rest = [i for i, w in enumerate(words) if w.upper() == "FOR"]
        words = words[rest[0] + 1:] if rest else []
    while words and words[-1] == ";":
        words.pop()
    if ";" in words:
        raise NotUnderLock("it is more than one statement; the sink runs custom_sql as one (MariaDB error 1064)")
    head = _upper(words[:4])
    if head[:1] == ["TRUNCATE"]:
        return _on_target(words[2:] if head[1:2] == ["TABLE"] else words[1:], table, connected_to,
                          LockedStatement("TRUNCATE", "DROP"), alone=True)
    if head[:2] == ["DROP", "TABLE"]:
        names = words[4:] if head[2:4] == ["IF", "EXISTS"] else words[2:]
        return _on_target(names, table, connected_to, LockedStatement("DROP TABLE", "DROP"), alone=True)
    if head[:1] == ["ALTER"]:
        at = next((i for i, w in enumerate(words[:4]) if w.upper() == "TABLE"), None)
        if at is None or any(w.upper() not in ("ONLINE", "IGNORE") for w in words[1:at]):
            raise NotUnderLock("only ALTER TABLE of the target runs under LOCK TABLES here")
        rest = _upper(words[at + 1:])
        if any(w == "RENAME" and nxt not in ("COLUMN", "INDEX", "KEY") for w, nxt in zip(rest, rest[1:] + [""])):
            raise NotUnderLock("it renames the table: its name would be free for another writer, and SeaTide's "
                               "checks and records name the table by it")
        if "REFERENCES" in rest:
            raise NotUnderLock(_OTHER_TABLE)
        return _on_target(words[at + 1:], table, connected_to, LockedStatement("ALTER TABLE", "ALTER"))
    index = next((i for i, w in enumerate(words[:3]) if w.upper() == "INDEX"), None)
    if head[:1] in (["CREATE"], ["DROP"]) and index is not None and "ON" in _upper(words):
        kind = head[0]
        if kind == "CREATE" and any(w.upper() not in ("UNIQUE", "FULLTEXT", "SPATIAL") for w in words[1:index]):
            raise NotUnderLock("only CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX ... ON the target runs under LOCK TABLES here")
        on = _upper(words).index("ON")
        return _on_target(words[on + 1:], table, connected_to, LockedStatement(f"{kind} INDEX", "INDEX"))
    if head[:2] == ["RENAME", "TABLE"]:
        raise NotUnderLock("RENAME TABLE cannot run while tables are locked (MariaDB error 1192)")
    if head[:1] == ["CREATE"]:
        raise NotUnderLock("it creates a table or another object, which is not locked (MariaDB error 1100)")
    raise NotUnderLock("SeaTide runs only TRUNCATE, ALTER TABLE, DROP TABLE, CREATE INDEX and DROP INDEX on "
                       "the target under LOCK TABLES")


# A DML custom_sql's (or TRUNCATE's) verb, the word before its table, and the words between that mean nothing here
_CHANGES = {"DELETE": "FROM", "UPDATE": None, "INSERT": "INTO", "REPLACE": "INTO", "TRUNCATE": "TABLE"}
_MODIFIERS = {"LOW_PRIORITY", "QUICK", "IGNORE", "DELAYED", "HIGH_PRIORITY", "ONLY"}


def changed_table(sql: str, fold: bool = False) -> tuple[str, tuple[str, ...]] | None:
    """(verb, table as named) of a one-statement ``DELETE FROM t``, ``UPDATE t``, ``INSERT INTO t``,
    ``REPLACE INTO t`` or ``TRUNCATE [TABLE] t`` (``privileges.custom_sql_needs``: the verb is the
    privilege asked, TRUNCATE's on PostgreSQL); None for anything else. ``fold``: unquoted names are
    lower-cased, as PostgreSQL does."""
    words = _tokens(sql)
    while words and words[-1] == ";":
        words.pop()
    if not words or ";" in words or words[0].upper() not in _CHANGES:
        return None
    verb, rest = words[0].upper(), words[1:]
    while rest and rest[0].upper() in _MODIFIERS:
        rest = rest[1:]
    if rest[:1] and rest[0].upper() == _CHANGES[verb]:
        rest = rest[1:]
    elif verb == "DELETE":          # DELETE t1 FROM t1 JOIN ...: more than one table
        return None
    while rest and rest[0].upper() == "ONLY":
        rest = rest[1:]
    name = rest[:3] if rest[1:2] == ["."] else rest[:1]
    parts = [w for w in name if w != "."]
    if not parts or any(not (w[:1] in "`\"" or re.fullmatch(r"\w+", w)) for w in parts):
        return None
    return verb, tuple(w[1:-1].replace(w[0] * 2, w[0]) if w[:1] in "`\"" else w.lower() if fold else w
                       for w in parts)


def _on_target(words: list[str], table: tuple[str, ...], connected_to: str | None, found: LockedStatement,
               alone: bool = False) -> LockedStatement:
    """``found`` when ``words`` begin with the target's name (and, ``alone``, hold nothing more)."""
    name = words[:3] if words[1:2] == ["."] else words[:1]
    named = tuple(_unquoted(w) for w in name if w != ".")
    database, target = (table[0] if len(table) > 1 else connected_to), table[-1]
    if not named or (named != (database, target) and not (named == (target,) and database == connected_to)):
        if named == (target,):
            raise NotUnderLock(f"{target} unqualified is looked up in the connection's database ({connected_to}), "
                               f"not the target's ({database}): name it {database}.{target}")
        raise NotUnderLock(_OTHER_TABLE if named else "SeaTide cannot tell which table it names")
    if alone and words[len(name):]:
        raise NotUnderLock(_OTHER_TABLE if "," in words[len(name):] else "SeaTide cannot tell what follows the "
                           "table's name")
    return found


def _tokens(sql: str) -> list[str]:
    return [m.group(0) for m in _TOKEN.finditer(sql) if m.lastgroup != "skip"]


def _upper(words: list[str]) -> list[str]:
    return [w.upper() for w in words]


def _unquoted(word: str) -> str:
    return word[1:-1].replace("``", "`") if word.startswith("`") else word


# --- the server's refusal of a step: no retry passes it ------------------------------------------

# MariaDB: access denied (to the database, the login, a table, a column, a command), the statement's
# syntax (and a second statement), a table not locked or a command LOCK TABLES forbids, a name the
# statement gives that is missing or taken
_MYSQL_LASTING = {1044: "grant", 1045: "grant", 1142: "grant", 1143: "grant", 1227: "grant",
                  1064: "syntax", 1149: "syntax", 1100: "lock", 1192: "lock",
                  1146: "names", 1054: "names", 1091: "names", 1060: "names", 1061: "names", 1050: "names",
                  1451: "references", 1217: "references", 1701: "references", 3730: "references"}
_FIXES = {
    "grant": "grant the sink's user the privilege the server names (docs/connectors/jdbc-sink.md, \"Privileges\")",
    "syntax": "fix the statement: the server cannot parse it (custom_sql is sent as one statement)",
    "lock": "run only a statement on the target table alone, which LOCK TABLES lets run (TRUNCATE TABLE, ALTER "
            "TABLE, DROP TABLE, CREATE or DROP INDEX ... ON it), a DML custom_sql (DELETE FROM ...), or run "
            "this one before the job",
    "names": "fix the statement: a table, column or index it names is missing or already there",
    # another table's foreign key (or, PostgreSQL, a view) depends on the table's rows or on the table:
    # every attempt is refused alike until the job's options change (outside review, #9)
    "references": "another table's foreign key references the table's rows (or another object depends on the "
                  "table), so the server refuses to empty or drop it: use data_save_mode CUSTOM_PROCESSING with a "
                  "custom_sql that respects the keys (a DELETE of the referencing rows first, or keys declared ON "
                  "DELETE CASCADE), or data_save_mode APPEND_DATA and empty the tables before the job (instead of "
                  "RECREATE_SCHEMA, which drops the table: schema_save_mode CREATE_SCHEMA_WHEN_NOT_EXIST)",
}
# PostgreSQL: syntax or a name or a privilege (42: 42601, 42P01, 42703, 42501, ...), a feature not supported
_PG_LASTING = ("42", "0A")
_PG_REFERENCES = ("23503", "2BP01")      # foreign_key_violation, dependent_objects_still_exist


def refused_for_good(exc: BaseException) -> str | None:
    """For the server's refusal of a step's statement that no retry can pass, what fixes it; None
    when trying again may pass (a lost connection, a lock wait, a deadlock)."""
    sqlstate = getattr(exc, "sqlstate", None)
    if (type(exc).__module__ or "").startswith("psycopg"):
        if sqlstate in _PG_REFERENCES:
            return _FIXES["references"]
        if not isinstance(sqlstate, str) or not sqlstate.startswith(_PG_LASTING):
            return None
        return _FIXES["grant"] if sqlstate == "42501" else \
            "fix the statement: the server says it is wrong or names what is not there"
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    return _FIXES[_MYSQL_LASTING[code]] if code in _MYSQL_LASTING else None


__all__ = ["LockedStatement", "NotUnderLock", "changed_table", "locked_statement", "refused_for_good"]
