"""A store of its own for a benchmark run: a SQLite file, or a new PostgreSQL database on the
shared server (dropped by the returned callable, even with sessions still open)."""

from __future__ import annotations

import secrets
from typing import Callable

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def scratch_store(kind: str, tmp: str, prefix: str = "seatide_bench") -> tuple[str, Callable[[], None]]:
    """(store URL, drop) for ``kind`` 'sqlite' (a file under ``tmp``) or 'postgresql'."""
    from sqlalchemy import create_engine, text

    from seatide.testing.pg_tablespace import in_memory

    if kind == "sqlite":
        return f"sqlite:///{tmp}/{prefix}.db", lambda: None
    name = f"{prefix}_{secrets.token_hex(3)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}{in_memory()}"))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()
    return f"postgresql://postgres@127.0.0.1:5432/{name}", drop
