"""Where a state store is: its URL as SQLAlchemy wants it, as a log may show it, and how long
opening one waits for another process.

Apart from ``db.py`` because the migrations need these too, and ``db.py`` opens a store by
migrating it: with them in ``db.py`` the two modules imported each other.
"""

from __future__ import annotations

import os

# How long opening a store waits for another process that holds it while creating or
# migrating it (and how long a SQLite writer waits for the file's write lock).
OPEN_WAIT_S = 60.0
# How long a PostgreSQL connection may take to be made (store/db.py): longer is a server that will not answer.
CONNECT_TIMEOUT_S = 10
# Every PostgreSQL connection's client side: a statement sent into a black hole (a failover that moved the server's
# address) fails after tcp_user_timeout, and an answer that never comes once the keepalives give up, instead of
# after the kernel's retransmissions (about 15 minutes); either is then a broken session, taken again on a new one
# (store/sessions.py). The fences do not wait for either (worker/lock_regain.py, the drivers' self-fence): these let
# a process recover sooner.
CLIENT_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 1, "keepalives_count": 3,
                     "tcp_user_timeout": 5000}


def client_keepalives(url: str) -> dict:
    """``CLIENT_KEEPALIVES`` for the settings the store's URL does not make itself (a link
    slower than these suit sets its own there: ``?tcp_user_timeout=20000``)."""
    from urllib.parse import parse_qs, urlsplit

    given = parse_qs(urlsplit(url).query)
    return {key: value for key, value in CLIENT_KEEPALIVES.items() if key not in given}


def normalize_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def default_store_url(data_dir: str) -> str:
    return f"sqlite:///{os.path.join(os.path.abspath(data_dir), 'state.db')}"


def redact(url: str) -> str:
    """Hide a password in a store URL."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return url
