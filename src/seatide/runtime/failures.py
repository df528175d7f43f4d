"""Whether a failure is worth a retry, judged by its cause.

A retry helps when the world was in the way (a database that refused a connection, a
deadlock, a full disk, an executor lost); it cannot help when the job itself is wrong (a
column that does not exist, a value that does not cast, a feature not supported). Spark
and JDBC drivers name the cause with a SQLSTATE, whose class (first two characters) says
which of the two it is; the exception's Python class does not (an AnalysisException may
be a missing column or an unreachable catalog, and a division by zero in the data is not
an AnalysisException at all).
"""

from __future__ import annotations

import re

from seatide.plugin.base import PERMANENT_MARK, PermanentError

# SQLSTATE classes no retry can fix: the job or its data is wrong.
PERMANENT_CLASSES = {
    "0A": "a feature is not supported",
    "21": "a cardinality violation",
    "22": "a value in the data is invalid for its operation",
    "23": "an integrity constraint was violated",
    "42": "the query is wrong (syntax, a name, a type)",
}
# Everything else is retried: 08 connection, 40 rollback (deadlock, serialization),
# 53 insufficient resources, 57 operator intervention, 58 system error, XX internal.

_SQLSTATE_IN_TEXT = re.compile(r"SQLSTATE:?\s*([0-9A-Z]{5})")


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE Spark (or the JDBC driver under it) gave this failure, if any."""
    getter = getattr(exc, "getSqlState", None)
    if callable(getter):
        try:
            state = getter()
        except Exception:   # a Py4J error whose Java side is gone
            state = None
        if state:
            return str(state)
    found = _SQLSTATE_IN_TEXT.search(str(exc))
    return found.group(1) if found else None


# A refused login (SQLSTATE class 28: a wrong password, an unknown user) fails every retry the
# same way. The Python clients a source logs in with on the driver (PyMySQL, psycopg) carry the
# server's SQLSTATE as ``sqlstate``; only this class (and 42501 below) is taken from them so far,
# the others keep being judged by Spark's and the JDBC drivers' states alone.
REFUSED_LOGIN = "28"
# So is a privilege the server refuses (42501, "permission denied"): granted by someone, not by a retry.
REFUSED_PRIVILEGE = "42501"


# Spark's UnsupportedOperationChecker refuses a streaming plan (a sort of a stream, a join without a
# watermark, ...) under this legacy error condition, with no SQLSTATE; its message is the refusal's
# sentence, then ";" and the whole plan.
UNSUPPORTED_STREAMING = "_LEGACY_ERROR_TEMP_3102"


def _condition_of(exc: BaseException) -> str | None:
    getter = getattr(exc, "getCondition", None)
    try:
        return getter() if callable(getter) else None
    except Exception:   # a Py4J error whose Java side is gone
        return None


def permanent_cause(exc: BaseException) -> str | None:
    """Why no retry can fix ``exc`` (for the error message), or None when a retry may."""
    if _condition_of(exc) == UNSUPPORTED_STREAMING:
        return "Spark does not support the query on a stream"
    client_state = getattr(exc, "sqlstate", None)
    if isinstance(client_state, str) and client_state.startswith(REFUSED_LOGIN):
        return "the database refused the login (user or password)"
    if client_state == REFUSED_PRIVILEGE:
        return "the database refused a privilege the job needs (permission denied)"
    state = sqlstate_of(exc)
    if state is None:
        return None
    return PERMANENT_CLASSES.get(state[:2])


def describe_error(exc: BaseException) -> tuple[str, bool]:
    """A one-paragraph message for errorMsg, and whether the failure is permanent (by its
    cause, ``permanent_cause``)."""
    permanent = isinstance(exc, PermanentError) or permanent_cause(exc) is not None
    text = str(exc).strip() or type(exc).__name__
    if PERMANENT_MARK in text:
        # raised in a Python worker: keep the message, drop Spark's wrapping and traceback
        text = text.split(PERMANENT_MARK, 1)[1].split("\n")[0].strip()
        return text[:4000], True
    if _condition_of(exc) == UNSUPPORTED_STREAMING:
        # the refusal's sentence, not the plan dumped after it
        text = "Spark refused the query: " + text.split("\n")[0].rstrip(";").strip()
    elif not isinstance(exc, PermanentError):
        text = f"{type(exc).__name__}: {text}"
    return text[:4000], permanent
