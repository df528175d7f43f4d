"""Whether the sink's user may create temporary tables, in which a small batch collected on the
driver is staged inside the batch's own transaction.

SeaTunnel's MySQL sink user has SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX and ALTER, and
not CREATE TEMPORARY TABLES; a PostgreSQL user may lack TEMPORARY on the database. A job SeaTunnel
runs with those privileges runs here too (issue 32): such a user's batches are staged into ordinary
staging tables instead (made and filled before the transaction, dropped after it, as Spark's are),
and the log says so once per writer.
"""

from __future__ import annotations

import logging
import uuid

from seatide.connectors.jdbc.dialect import Dialect
from seatide.connectors.jdbc.url import POSTGRESQL

log = logging.getLogger(__name__)

# MySQL's "access denied" for a database (ER_DBACCESS_DENIED_ERROR) and for a table
_ACCESS_DENIED = (1044, 1142)


def may_create_temporary_tables(conn, dialect: Dialect, where: tuple[str, ...], user: str | None,
                                sink_id: str) -> bool:
    """Ask the server (PostgreSQL: the TEMPORARY privilege; MySQL: by making one in ``where``, a
    database or (): the connection's), and say once when the answer is no."""
    cursor = conn.cursor()
    if dialect.name == POSTGRESQL:
        cursor.execute("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
        allowed = bool(cursor.fetchone()[0])
        conn.rollback()
    else:
        probe = dialect.qualified((*where, f"seatide_probe_{uuid.uuid4().hex[:8]}"))
        try:
            cursor.execute(f"CREATE TEMPORARY TABLE {probe} (x INT)")
            cursor.execute(f"DROP TEMPORARY TABLE {probe}")
            allowed = True
        except Exception as exc:  # noqa: BLE001 - only the server's refusal is an answer
            if not exc.args or exc.args[0] not in _ACCESS_DENIED:
                raise
            allowed = False
    if not allowed:
        grant = "TEMPORARY on the database" if dialect.name == POSTGRESQL else "CREATE TEMPORARY TABLES"
        log.warning("Jdbc sink %s: user %s may not create temporary tables (%s): small batches collected on the "
                    "driver are staged into ordinary staging tables, made before each batch's transaction and "
                    "dropped after it; grant %s to stage them inside the transaction", sink_id, user or "(default)",
                    grant, grant)
    return allowed


__all__ = ["may_create_temporary_tables"]
