"""What a test database costs the shared PostgreSQL server: on its default tablespace (disk)
against the tablespace in memory that ``scripts/services`` makes (seatide/testing/pg_tablespace.py),
alternating, in one run.

    .venv/bin/python bench/test_databases.py [--rounds 2] [--databases 15]

Each database is what a store test's fixture makes: CREATE DATABASE, a SeaTide store opened in it
(its tables made), DROP DATABASE WITH (FORCE). Reports, per database, the CPU of every
``postgres`` process (backends' exits included, through the postmaster's children's time) and
the wall time, and the ratio (memory / disk; lower is cheaper).
"""

from __future__ import annotations

import argparse
import os
import secrets
import time

from sqlalchemy import create_engine, text

from seatide.store.db import open_store
from seatide.testing.pg_tablespace import SHARED_SERVER, TABLESPACE, in_memory

_HZ = os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float:
    """CPU-s of the postgres processes so far, their reaped children's included."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        if "(postgres)" in stat:
            fields = stat.rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])
    return total / _HZ


def per_database(admin, clause: str, count: int) -> tuple[float, float]:
    cpu, started = postgres_cpu(), time.monotonic()
    for _ in range(count):
        name = f"seatide_bench_{secrets.token_hex(4)}"
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}{clause}"))
            conn.execute(text(f"ALTER DATABASE {name} SET synchronous_commit = off"))
        open_store(f"postgresql://postgres@127.0.0.1:5432/{name}").dispose()
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    return (postgres_cpu() - cpu) / count, (time.monotonic() - started) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--databases", type=int, default=15)
    args = parser.parse_args()
    if not in_memory():
        print(f"bench/test_databases: no tablespace {TABLESPACE} on the shared server; run scripts/services first")
        return 2
    admin = create_engine(SHARED_SERVER.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    for _ in range(args.rounds):
        disk = per_database(admin, "", args.databases)
        memory = per_database(admin, in_memory(), args.databases)
        print(f"disk {disk[0] * 1000:.0f} ms CPU {disk[1] * 1000:.0f} ms wall; memory {memory[0] * 1000:.0f} ms CPU "
              f"{memory[1] * 1000:.0f} ms wall; ratio {memory[0] / disk[0]:.2f}x CPU, load {os.getloadavg()[0]:.1f}")
    admin.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
