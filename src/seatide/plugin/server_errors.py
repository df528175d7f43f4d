"""What a source server's error is: an outage that trying again clears, or an answer that it never will.

The leader's release and a resume's position check talk to the sources' servers (``Source.release``,
``Source.position_gone``) and catch whatever the driver raises. A server that cannot be reached (refused,
timed out, a name not resolved, a connection lost) may be back later: the release retries, the position
check leaves it to the driver's read. A server that answered with an error (a role it does not know, a
password it rejects, a privilege the role lacks) or a SeaTide bug is no
outage: it is named as what it is, with its fix where there is a known one (outside review of
7d56489..26756a7, F5 and F6). A server that answered with a passing condition (its connections all taken, starting
up or shutting down, a statement timeout on a slow server, a replication slot still held by a walsender that is
exiting) is retried like an outage: the next try usually passes (outside review of b5aba34..HEAD, R2). Read from
the exception alone (psycopg 3, PyMySQL, the OS), no driver imported.
"""

from __future__ import annotations

import socket

# PyMySQL's client errors of a connection that was never made or was lost (CR_CONN_HOST_ERROR, ...)
_MYSQL_UNREACHABLE = {2002, 2003, 2005, 2006, 2013, 2055}
# Access denied: to the server, a database, a command, a table (ER_ACCESS_DENIED_ERROR, ...)
_MYSQL_DENIED = {1044, 1045, 1142, 1227, 1698}
# Too many connections (server-wide, per user), a lock wait or a statement's time limit: they pass
_MYSQL_PASSING = {1040, 1203, 1205, 3024}
# PostgreSQL's passing conditions: too many connections (53300), a statement timeout or cancel (57014), the server
# shutting down or starting up (57P01, 57P02, 57P03), a slot still active (55006: a walsender on its way out)
_PG_PASSING = {"53300", "57014", "57P01", "57P02", "57P03", "55006"}
# libpq says these before the server has a session, with no SQLSTATE on the exception
_PG_PASSING_TEXT = ("too many connections", "remaining connection slots are reserved", "the database system is starting up",
                    "the database system is shutting down", "the database system is in recovery mode",
                    "the database system is not yet accepting connections", "is active for PID")


def unreachable(exc: BaseException) -> bool:
    """The server could not be reached (down, refused, no route, name not resolved, timed out, connection lost):
    trying again later may succeed."""
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror, socket.timeout)):
        return True
    module = type(exc).__module__ or ""
    if module.startswith("psycopg"):
        # libpq's connection failures carry no SQLSTATE; a server that answered says FATAL (auth, no database).
        # A subclass counts: libpq's connect timeout is psycopg.errors.ConnectionTimeout (a server that never answers)
        return getattr(exc, "sqlstate", None) is None and "FATAL:" not in str(exc) and \
            any(c.__name__ == "OperationalError" for c in type(exc).__mro__)
    if module.startswith("pymysql"):
        return bool(exc.args) and exc.args[0] in _MYSQL_UNREACHABLE
    return False


def passing(exc: BaseException) -> bool:
    """Trying again may clear it: the server could not be reached (``unreachable``), or it answered with a
    condition that passes by itself (busy, starting up, shutting down, a statement timed out, a slot in use)."""
    if unreachable(exc):
        return True
    module = type(exc).__module__ or ""
    if module.startswith("psycopg"):
        text = str(exc)
        return getattr(exc, "sqlstate", None) in _PG_PASSING or any(t in text for t in _PG_PASSING_TEXT)
    if module.startswith("pymysql"):
        return bool(exc.args) and exc.args[0] in _MYSQL_PASSING
    return False


def lasting_fix(exc: BaseException) -> str | None:
    """For an error that trying again does not clear, what clears it (None: it may pass, retried)."""
    if passing(exc):
        return None
    sqlstate = getattr(exc, "sqlstate", None)
    text = str(exc)
    if sqlstate == "42501" or "must be superuser or replication role" in text:
        return ("grant the source's user the privilege the server names (for a replication slot: ALTER ROLE "
                "<user> REPLICATION), or drop the slot and its publication by hand")
    if (sqlstate or "").startswith("28") or "password authentication failed" in text or \
            ("FATAL:" in text and "does not exist" in text) or "no pg_hba.conf entry" in text:
        return "the server refused the source's user or database: fix the username, password or database in the job"
    if (type(exc).__module__ or "").startswith("pymysql") and exc.args and exc.args[0] in _MYSQL_DENIED:
        return "grant the source's user the privilege the server names, or fix its username or password in the job"
    return "it is no outage: fix its cause (one SeaTide's own: report it with this message)"


__all__ = ["lasting_fix", "passing", "unreachable"]
