"""What a sink writes, named one way: the one place that says whether two sinks' targets are the
same, or overlap (outside review 7).

A target key names what a destructive save mode empties, so the spellings of one target give one
key: a LocalFile path with or without its trailing slash, through a symlink or directly (its real
path: outside review 8b, F9, two keys for one directory took two DROP_DATA decisions); a Jdbc server
as ``localhost`` or ``127.0.0.1``. A key never depends on DNS (outside review 8: a failed or changed
answer in one attempt gave its target a new key, under which the run's decision and the committed
marks were not found, and its DROP_DATA ran over committed rows); the path as spelled, which every
checkpoint before the real path holds, stays the target's earlier key (``file_target_spelled``,
``connectors/file/sink.py``). Keys that differ may still overlap, and ``overlaps``
errs that way: DROP_DATA on a directory removes every file under it, also another sink's in a path
inside it or reached through a symlink, or a Paimon table in it; one database server named by host and by address (looked
up when overlap is asked, never kept in a key); a Jdbc sink in query mode writes the table its
INSERT names, or, where SeaTide cannot tell which, any table of its database (any database of a
MySQL server); table names compare without case.
``plan/shared_targets.py`` (when planning) and the door's records (``plugin/save_mode_door.py``,
``store/kept_output.py``) both ask here. Lives in ``store``: the lowest layer that holds the keys.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
import threading

UNKNOWN_TABLE = "*"       # a query whose table SeaTide cannot read: every table of its database
_LOOPBACK = "127.0.0.1"
_LOOKUP_S = 2.0           # a name server that does not answer in time: the hosts may be one (errs wide)
_NAME = r'(?:"[^"]+"|`[^`]+`|\[[^\]]+\]|[\w$]+)'
_QUERY_TABLE = re.compile(r"^\s*(?:INSERT|UPSERT|REPLACE|MERGE)\s+"
                          r"(?:(?:IGNORE|LOW_PRIORITY|DELAYED|HIGH_PRIORITY)\s+)*(?:INTO\s+)?"
                          rf"(?!INTO\s)(?P<table>{_NAME}(?:\s*\.\s*{_NAME})*)(?=[\s(;]|$)", re.IGNORECASE)
# How the first target keys read it (2026-11-30) (quoted names cut at their first character outside [\w$]): its keys are
# earlier spellings a resume must still find (``connectors/jdbc/target_names.py``)
_QUERY_TABLE_FIRST = re.compile(r"^\s*(?:INSERT|UPSERT|REPLACE|MERGE)\s+"
                              r"(?:(?:IGNORE|LOW_PRIORITY|DELAYED|HIGH_PRIORITY)\s+)*(?:INTO\s+)?"
                              r"(?P<table>(?:[`\"\[]?[\w$]+[`\"\]]?\s*\.\s*)*[`\"\[]?[\w$]+[`\"\]]?)", re.IGNORECASE)
_ICEBERG = "iceberg:"      # after a warehouse path and "#": an Iceberg table's name (a Paimon table's has none)
_EARLIER_QUERY = "query"  # the table part of a query sink's key before target keys: any table, as UNKNOWN_TABLE


def file_target(path: str) -> str:
    """A local path as one key: the real path of the directory (``out``, ``out/``, ``./out`` and a
    link to it are one directory): its deepest existing ancestor resolved, the rest as written (a
    directory made later keeps the key it had)."""
    return os.path.realpath(file_target_spelled(path))


def file_target_spelled(path: str) -> str:
    """The key SeaTide gave a local path before ``file_target`` followed links: absolute and
    normalised as spelled, as LocalFile's root is; checkpoints and decisions made then name it."""
    value = re.sub(r"^file:(//)?", "", path.strip())
    return os.path.abspath(os.path.expanduser(value))


def iceberg_target(warehouse: str, name: str) -> str:
    """An Iceberg table of a hadoop warehouse as one key: the warehouse's real path (``file_target``)
    and ``namespace.table``; it lies in ``<warehouse>/<namespace levels>/<table>`` (``_on_disk``)."""
    return f"{file_target(warehouse)}#{_ICEBERG}{name}"


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
    None where SeaTide cannot read it (then the target is ``UNKNOWN_TABLE``). A quoted name is read
    whole (outside review 8b, F3: ``"order-items"`` read as ``order`` missed the table it writes)."""
    table = _statement_table(query, _QUERY_TABLE)
    return None if table is None else tuple(name[1:-1] if name[0] in '"`[' else name
                                            for name in re.findall(_NAME, table))


def query_table_first_read(query: str) -> tuple[str, ...] | None:
    """``query_table`` as the first target keys read it (2026-11-30), which named the keys its
    checkpoints hold."""
    table = _statement_table(query, _QUERY_TABLE_FIRST)
    return None if table is None else tuple(part.strip().strip('`"[]') for part in table.split("."))


def _statement_table(query: str, reader: re.Pattern) -> str | None:
    """The table part of a single statement ``reader`` reads; None: not read, or several statements."""
    match = reader.match(query or "")
    return None if match is None or ";" in query.strip().rstrip(";") else match.group("table")


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
        a, b = _on_disk(a), _on_disk(b)
        if _inside(a, b) or _inside(b, a):
            return True
        real_a, real_b = os.path.realpath(a), os.path.realpath(b)     # only when the spellings do not tell
        return _inside(real_a, real_b) or _inside(real_b, real_a)
    if a.startswith("jdbc:") and b.startswith("jdbc:"):
        (a_server, *a_table), (b_server, *b_table) = _jdbc_parts(a), _jdbc_parts(b)
        if a_server[0] != b_server[0] or a_server[2] != b_server[2] or not _one_host(a_server[1], b_server[1]):
            return False
        (a_db, a_schema, a_name), (b_db, b_schema, b_name) = a_table, b_table
        if UNKNOWN_TABLE in (a_name, b_name):
            # MySQL has no level between a server and its databases: a statement SeaTide cannot read
            # may write any of them (F2)
            return a_db == b_db or a_server[0] == "mysql"
        return a_db == b_db and a_name == b_name and (None in (a_schema, b_schema) or a_schema == b_schema)
    return False


def _jdbc_parts(key: str) -> tuple[tuple[str, str, str], str, str | None, str]:
    """((dialect, host, port), database, schema or None where the key does not say, table) of a Jdbc
    key, as ``jdbc_target`` makes it or as an earlier SeaTide did: ``…/db//query`` for a query sink,
    ``…/db/<schema.table or query>`` before that (F4); names without case, as PostgreSQL folds
    unquoted names and MySQL on most hosts does."""
    head, _, rest = key.lower().partition("://")
    server, _, path = rest.partition("/")
    host, _, port = server.rpartition(":")
    dialect = head.removeprefix("jdbc:")
    parts = path.split("/")
    if len(parts) >= 3:
        database, schema, table = parts[0], parts[1], "/".join(parts[2:])
        schema, table = (None, UNKNOWN_TABLE) if (schema, table) == ("", _EARLIER_QUERY) else (schema, table)
    else:
        database, label = (parts + [""])[:2]
        schema, _, table = label.rpartition(".") if "." in label else (None, "", label)
        table = UNKNOWN_TABLE if table == _EARLIER_QUERY and schema is None else table
    if dialect == "postgresql" and not database:
        database = "postgres"       # where a URL without a database connects (``JdbcSinkSpec.target_name``)
    return (dialect, host, port), database, schema, table


def _one_host(a: str, b: str) -> bool:
    """Whether two hosts, spelled apart, may be one server: the same spelling, or addresses they share
    (F1: a key stays spelling-only, so a resume finds it whatever DNS answers then; overlap asks)."""
    if a == b:
        return True
    a_addresses, b_addresses = _addresses(a), _addresses(b)
    return a_addresses is None or b_addresses is None or bool(a_addresses & b_addresses)


@functools.lru_cache(maxsize=256)
def _addresses(host: str) -> frozenset | None:
    """The host's addresses, loopback spelled one way; None when the lookup failed or took longer than
    ``_LOOKUP_S`` (asked inside a store read: a resolver that hangs must not hold it past its limits)."""
    found: list[frozenset] = []

    def look_up() -> None:
        try:
            found.append(frozenset(server_host(info[4][0]) for info in socket.getaddrinfo(host, None)))
        except (OSError, UnicodeError):
            pass

    thread = threading.Thread(target=look_up, name=f"resolve-{host}", daemon=True)
    thread.start()
    thread.join(_LOOKUP_S)
    return found[0] if found else None


def any_overlap(keys, others) -> bool:
    """Whether any of ``keys`` overlaps any of ``others`` (``overlaps``)."""
    return any(overlaps(key, other) for key in keys for other in others)


def _on_disk(key: str) -> str:
    """A path key as the directory it names: a Paimon table's (``<warehouse>#<db>.<table>``) is
    ``<warehouse>/<db>.db/<table>``, an Iceberg table's (``iceberg_target``) is ``<warehouse>/<namespace
    levels>/<table>``, which a LocalFile DROP_DATA of the warehouse empties (outside review 8b, F7)."""
    warehouse, hash_, table = key.partition("#")
    if hash_ and table.startswith(_ICEBERG):
        return os.path.join(warehouse, *table[len(_ICEBERG):].split("."))
    database, dot, name = table.partition(".")
    return os.path.join(warehouse, f"{database}.db", name) if hash_ and dot else key


def _inside(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip(os.sep) + os.sep)


__all__ = ["UNKNOWN_TABLE", "any_overlap", "file_target", "file_target_spelled", "iceberg_target", "jdbc_target", "overlaps", "query_table", "query_table_first_read",
           "server_host"]
