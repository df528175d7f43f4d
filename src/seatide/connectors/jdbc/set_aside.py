"""RECREATE_SCHEMA on MySQL/MariaDB without LOCK TABLES: the table is set aside, checked, then dropped.

MySQL's DROP TABLE commits at once, so a check of kept rows (``store/kept_output.py``) cannot be
rolled back after it: the check must come after the last batch another writer could commit into
the table. ``LOCK TABLES`` held writers off while the check ran, but SeaTunnel's sink user has no
LOCK TABLES privilege, and without it the DROP took a batch committed between the check and the
DROP (outside review, F4). ``RENAME TABLE`` needs only ALTER, DROP, CREATE and INSERT, which that
user has: it waits for every open transaction on the table (its metadata lock), so a batch being
committed there is committed before it, and its note (``SinkCommitLog.applying``) is seen by the
check that follows; a batch that comes later finds no table and fails, committing nothing. So:
set aside, check, then drop the table set aside (refused: put back). The name set aside is the
decision's own (``aside``), in the table's database: a carrier that died between setting it aside
and dropping it leaves it there, and whoever carries the decision out next puts it back first
(``put_back``), under the decision's named lock, so the check is made again over its rows.
"""

from __future__ import annotations

import hashlib

from seatide.connectors.jdbc.spec import JdbcSinkError

_NO_TABLE = 1146            # ER_NO_SUCH_TABLE
DENIED = (1044, 1142, 1227)        # access denied to the database, to the table, to the command


def aside(table: tuple[str, ...], record: str) -> tuple[str, ...]:
    """Where the decision ``record`` sets ``table`` aside: a name of its own beside it."""
    return (*table[:-1], "seatide_aside_" + hashlib.sha1(f"{record}/{table[-1]}".encode()).hexdigest()[:16])


def set_aside(cursor, dialect, table: tuple[str, ...], record: str, label: str, user: str | None) -> tuple | None:
    """Rename ``table`` to its ``aside`` name (waiting for its writers' open transactions), or None
    when there is no table to set aside. A user who may not rename gets a clear error, nothing destroyed."""
    moved = aside(table, record)
    try:
        cursor.execute(f"RENAME TABLE {dialect.qualified(table)} TO {dialect.qualified(moved)}")
    except Exception as exc:
        code = exc.args[0] if exc.args else None
        if code == _NO_TABLE:
            return None
        if code in DENIED:
            raise JdbcSinkError(
                f"Jdbc sink: schema_save_mode RECREATE_SCHEMA on table {label}: the user {user or ''} may not rename "
                f"it ({exc.args[-1]}); SeaTide renames the table aside, checks that no pipeline keeps rows in it, "
                f"then drops it, so that a batch committed meanwhile is never dropped. Nothing was destroyed. "
                f"Grant ALTER, DROP, CREATE and INSERT on its database (GRANT ALTER, DROP, CREATE, INSERT ON "
                f"<database>.* TO <user>), or choose schema_save_mode CREATE_SCHEMA_WHEN_NOT_EXIST") from None
        raise
    return moved


def put_back(cursor, dialect, table: tuple[str, ...], record: str, label: str) -> None:
    """Put back a table the decision ``record`` set aside and never dropped (its carrier died first)."""
    moved = aside(table, record)
    if not dialect.table_exists(cursor, moved):
        return
    if dialect.table_exists(cursor, table):
        raise JdbcSinkError(
            f"Jdbc sink: table {label} was set aside as {dialect.qualified(moved)} by a RECREATE_SCHEMA whose driver "
            f"ended before it dropped it, and a table {label} was made again since: the rows of the one set aside "
            f"are kept there, nothing was destroyed. Drop {dialect.qualified(moved)} if its rows are not wanted (or "
            f"move them into {label}), then run the job again")
    cursor.execute(f"RENAME TABLE {dialect.qualified(moved)} TO {dialect.qualified(table)}")


__all__ = ["DENIED", "aside", "put_back", "set_aside"]
