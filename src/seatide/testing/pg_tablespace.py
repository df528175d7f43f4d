"""Test databases on the shared PostgreSQL server, kept in memory.

A database is made by copying its template's ~300 files and dropped by deleting them. On this
machine's ext4 disk, finding free inodes among so many recently deleted ones (the kernel's
``find_inode_bit`` and ``recently_deleted``) took 13 % of both cores during a minute of the
suite's store tests: 300-400 ms of the server's CPU per test database, against 50-115 ms in a
tablespace on tmpfs, measured in the same minutes. ``scripts/services`` makes that tablespace;
a test database goes there when the server has it and its directory is there (tmpfs is empty
after a reboot until ``scripts/services`` runs again), else on the server's default tablespace.

Only test databases, each dropped after its test, live there: the server's own catalogs and
``test`` stay on disk, so a reboot loses nothing but what a test would have dropped.
"""

from __future__ import annotations

import functools
import os

TABLESPACE = "seatide_tests"
SHARED_SERVER = "postgresql://postgres@127.0.0.1:5432/test"
MEMORY = "/dev/shm"
# A private server after initdb is ~40 MB, a test database 7-8 MB, and a CDC server's slots keep
# its log: with less free (a container's 64 MB /dev/shm), they stay on disk, as before.
MEMORY_FREE_AT_LEAST = 1 << 30


def memory_room() -> str | None:
    """``/dev/shm`` when it can be written and has room for the tests' servers, else None."""
    try:
        stat = os.statvfs(MEMORY)
    except OSError:
        return None
    return MEMORY if os.access(MEMORY, os.W_OK) and stat.f_bavail * stat.f_frsize >= MEMORY_FREE_AT_LEAST else None


@functools.cache
def in_memory() -> str:
    """`` TABLESPACE seatide_tests`` to add to a CREATE DATABASE on the shared server, or ''."""
    try:
        import psycopg

        with psycopg.connect(SHARED_SERVER, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = %s",
                               (TABLESPACE,)).fetchone()
    except Exception:     # noqa: BLE001 - no server, no psycopg: the test's own opening says so
        return ""
    usable = row and row[0] and os.path.isdir(row[0]) and memory_room() is not None
    return f" TABLESPACE {TABLESPACE}" if usable else ""
