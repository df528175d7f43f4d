"""The Spark task try that staged each row of a keyless Jdbc sink, and the apply of one try a partition.

Spark's JDBC write commits a partition's rows at its task's end, and nothing ties that commit to
the task's success: a task run again after its first try committed (a speculative copy, an
executor lost after the commit, the commit's answer lost on the way) stages its partition twice.
A keyed sink applies each key's last change, which a change staged twice does not alter; a keyless
one inserted every staged row, so each of its rows staged by Spark carries its partition and a
hash naming its try (``STAGE_PART``, ``STAGE_TRY``), and the apply takes one try per partition.
A partition is one Spark write's: the routes (input tables) writing one target each stage their
own frame into the one staging table, so the partition number is hashed with the route's name.
Every try whose rows are in the staging table committed its whole partition: the table is
transactional wherever Spark may run a task twice (staging.py), so any one try is the partition.
Rows collected on the driver are staged once, by the driver, and carry none.
"""

from __future__ import annotations

import hashlib
from typing import Callable

from seatide.connectors.jdbc.url import POSTGRESQL

STAGE_PART = "__seatide_part"
STAGE_TRY = "__seatide_try"


def try_columns(dialect_name: str, quote: Callable[[str], str]) -> list[str]:
    """The two columns' definitions in a staging table. On PostgreSQL the server fills the try:
    Spark writes a partition in one transaction (its commit at the task's end), so the
    transaction's id names the try, and nothing is computed or sent for it a row (the staging
    write keeps a transaction: ``one_transaction``)."""
    filled = " DEFAULT txid_current()" if by_server(dialect_name) else ""
    return [f"{quote(STAGE_PART)} BIGINT", f"{quote(STAGE_TRY)} BIGINT{filled}"]


def by_server(dialect_name: str) -> bool:
    return dialect_name == POSTGRESQL


def one_transaction(options: dict) -> dict:
    """Spark's JDBC write ``options`` with a partition written in one transaction: a user's
    ``isolationLevel = NONE`` would commit every batch of rows on its own."""
    if str(options.get("isolationLevel", "")).upper() == "NONE":
        return {**options, "isolationLevel": "READ_UNCOMMITTED"}
    return options


def one_try(quote: Callable[[str], str], stage: str) -> str:
    """A condition on the rows of ``stage`` (quoted): one try's rows per partition."""
    part, tried = quote(STAGE_PART), quote(STAGE_TRY)
    return f"({part}, {tried}) IN (SELECT {part}, MAX({tried}) FROM {stage} GROUP BY {part})"


def task_try(route: str, dialect_name: str) -> list:
    """The Spark columns giving each row of ``route``'s frame its partition and (but where the
    server fills it: ``try_columns``) its task try. Spark's SQL has no function for a task's
    attempt; an executor names the thread running a task after the task and its TID
    (``Executor task launch worker for task 1.0 in stage 2.0 (TID 3)``), which no other try in
    the application shares, so the hash of the thread's name tells the tries of one partition
    apart, in the JVM (``java_method`` is evaluated where the task runs, and never folded: Spark
    takes it as nondeterministic). It costs about 3 µs of CPU a row (400,000 rows: 1.2 s).
    The partition is a route's: its name's hash above Spark's partition number."""
    from pyspark.sql import functions as F

    routed = int(hashlib.sha1(route.encode()).hexdigest()[:8], 16) << 24      # a route's partitions apart
    part = (F.lit(routed) + F.spark_partition_id()).alias(STAGE_PART)
    if by_server(dialect_name):
        return [part]
    return [part, F.expr("xxhash64(java_method('java.lang.Thread', 'currentThread'))").alias(STAGE_TRY)]


__all__ = ["STAGE_PART", "STAGE_TRY", "by_server", "one_transaction", "one_try", "task_try", "try_columns"]
