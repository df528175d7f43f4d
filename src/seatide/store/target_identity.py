"""What a sink writes, named one way: the one place that says whether two sinks' targets are the
same, or overlap (outside review 7).

A target key names what a destructive save mode empties, so every spelling of one place must give
one key: a LocalFile path with or without its trailing slash or through a symlink; a Jdbc server as
``localhost`` or ``127.0.0.1``. And keys that differ may still overlap: DROP_DATA on a directory
removes every file under it, also another sink's in a path inside it; a Jdbc sink in query mode
writes the table its INSERT names, or, where SeaTide cannot tell which, any table of its database.
``plan/shared_targets.py`` (when planning) and the door's records (``plugin/save_mode_door.py``,
``store/kept_output.py``) both ask here. Lives in ``store``: the lowest layer that holds the keys.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket

UNKNOWN_TABLE = "*"       # a query whose table SeaTide cannot read: every table of its database
_LOOPBACK = "127.0.0.1"
_QUERY_TABLE = re.compile(r"^\s*(?:INSERT|UPSERT|REPLACE|MERGE)\s+(?:IGNORE\s+)?(?:INTO\s+)?"
                          r"(?P<table>(?:[`\"\[]?[\w$]+[`\"\]]?\s*\.\s*)*[`\"\[]?[\w$]+[`\"\]]?)", re.IGNORECASE)


def file_target(path: str) -> str:
    """A local path as one key: absolute, normalised, symlinks resolved (``out``, ``out/`` and
    ``./out`` are one directory)."""
    value = re.sub(r"^file:(//)?", "", path.strip())
    return os.path.realpath(os.path.abspath(os.path.expanduser(value)))


@functools.lru_cache(maxsize=256)
def server_host(host: str) -> str:
    """A database server's host spelled one way: a loopback name or address is ``127.0.0.1``; a
    name that resolves, its lowest address; else the name in lower case (nothing to compare)."""
    name = host.strip().strip("[]").lower() or "localhost"
    try:
        addresses = sorted({info[4][0] for info in socket.getaddrinfo(name, None)})
    except (OSError, UnicodeError):
        return name
    if any(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return _LOOPBACK
    return addresses[0] if addresses else name


def query_table(query: str) -> tuple[str, ...] | None:
    """The table an ``INSERT``/``UPSERT``/``REPLACE``/``MERGE`` names, unquoted, split at its dots;
    None where SeaTide cannot read it (then the target is ``UNKNOWN_TABLE``)."""
    match = _QUERY_TABLE.match(query or "")
    if match is None:
        return None
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
        return a.startswith(b.rstrip(os.sep) + os.sep) or b.startswith(a.rstrip(os.sep) + os.sep)
    if a.startswith("jdbc:") and b.startswith("jdbc:"):
        (a_db, _, a_table), (b_db, _, b_table) = a.rpartition("/"), b.rpartition("/")
        return UNKNOWN_TABLE in (a_table, b_table) and a_db.rpartition("/")[0] == b_db.rpartition("/")[0]
    return False


__all__ = ["UNKNOWN_TABLE", "file_target", "jdbc_target", "overlaps", "query_table", "server_host"]
