"""What a sink writes, named one way: the one place that says whether two sinks' targets are the
same, or overlap (outside review 7).

A target key names what a destructive save mode empties, so the spellings SeaTide can tell apart
without asking anything outside give one key: a LocalFile path with or without its trailing slash;
a Jdbc server as ``localhost`` or ``127.0.0.1``. A key never depends on DNS or on the filesystem's
links at the moment it is made (outside review 8: a failed or changed DNS answer in one attempt
gave its target a new key, under which the run's decision and the committed marks were not found,
and its DROP_DATA ran over committed rows; a key through ``realpath`` differed from the key every
checkpoint of the previous version holds). Keys that differ may still overlap, and ``overlaps``
errs that way: DROP_DATA on a directory removes every file under it, also another sink's in a path
inside it or reached through a symlink; a Jdbc sink in query mode writes the table its INSERT names,
or, where SeaTide cannot tell which, any table of its database; table names compare without case.
``plan/shared_targets.py`` (when planning) and the door's records (``plugin/save_mode_door.py``,
``store/kept_output.py``) both ask here. Lives in ``store``: the lowest layer that holds the keys.
"""

from __future__ import annotations

import ipaddress
import os
import re

UNKNOWN_TABLE = "*"       # a query whose table SeaTide cannot read: every table of its database
_LOOPBACK = "127.0.0.1"
_QUERY_TABLE = re.compile(r"^\s*(?:INSERT|UPSERT|REPLACE|MERGE)\s+"
                          r"(?:(?:IGNORE|LOW_PRIORITY|DELAYED|HIGH_PRIORITY)\s+)*(?:INTO\s+)?"
                          r"(?P<table>(?:[`\"\[]?[\w$]+[`\"\]]?\s*\.\s*)*[`\"\[]?[\w$]+[`\"\]]?)", re.IGNORECASE)


def file_target(path: str) -> str:
    """A local path as one key: absolute and normalised (``out``, ``out/`` and ``./out`` are one
    directory), as LocalFile's root has always been; links are ``overlaps``' to follow."""
    value = re.sub(r"^file:(//)?", "", path.strip())
    return os.path.abspath(os.path.expanduser(value))


def server_host(host: str) -> str:
    """A database server's host spelled one way, from the spelling alone: a loopback name or
    address is ``127.0.0.1``; anything else the name in lower case."""
    name = host.strip().strip("[]").lower() or "localhost"
    if name == "localhost" or name.endswith(".localhost"):
        return _LOOPBACK
    try:
        return _LOOPBACK if ipaddress.ip_address(name.split("%")[0]).is_loopback else name
    except ValueError:
        return name


def query_table(query: str) -> tuple[str, ...] | None:
    """The table an ``INSERT``/``UPSERT``/``REPLACE``/``MERGE`` names, unquoted, split at its dots;
    None where SeaTide cannot read it (then the target is ``UNKNOWN_TABLE``)."""
    match = _QUERY_TABLE.match(query or "")
    if match is None or ";" in query.strip().rstrip(";"):
        return None             # not read, or more than one statement: any table
    return tuple(part.strip().strip('`"[]') for part in match.group("table").split("."))


def jdbc_target(dialect: str, host: str, port: int | None, database: str, schema: str, table: str) -> str:
    """A table as one key: server (``server_host``), database, schema (empty where the dialect has
    none) and table (``UNKNOWN_TABLE``: any table of the database)."""
    return f"jdbc:{dialect}://{server_host(host)}:{port}/{database}/{schema}/{table}"


def overlaps(a: str, b: str) -> bool:
    """Whether emptying target ``a`` may touch what a sink writes into ``b``, or the reverse: equal
    keys; a path inside the other; a Jdbc table and the unknown table of a query into its database."""
    if a == b:
        return True
    if a.startswith(os.sep) and b.startswith(os.sep):
        if _inside(a, b) or _inside(b, a):
            return True
        real_a, real_b = os.path.realpath(a), os.path.realpath(b)     # only when the spellings do not tell
        return _inside(real_a, real_b) or _inside(real_b, real_a)
    if a.startswith("jdbc:") and b.startswith("jdbc:"):
        a, b = a.lower(), b.lower()     # PostgreSQL folds unquoted names, MySQL on most hosts too
        (a_db, _, a_table), (b_db, _, b_table) = a.rpartition("/"), b.rpartition("/")
        return a == b or (UNKNOWN_TABLE in (a_table, b_table) and a_db.rpartition("/")[0] == b_db.rpartition("/")[0])
    return False


def any_overlap(keys, others) -> bool:
    """Whether any of ``keys`` overlaps any of ``others`` (``overlaps``)."""
    return any(overlaps(key, other) for key in keys for other in others)


def _inside(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip(os.sep) + os.sep)


__all__ = ["UNKNOWN_TABLE", "any_overlap", "file_target", "jdbc_target", "overlaps", "query_table", "server_host"]
