"""A Paimon table's batches staged and not yet committed, on record in the warehouse beside the table.

A writer's batch is decided in its job's store before Paimon's commit names its files: a late
RECREATE_SCHEMA of another job saw no snapshot of it, and the writer's shared hold of the table's
lock went with its driver, or with a publish that merely raised (the batch still decided). Carried
out then, the drop took the decided batch for good (outside review 2, H1). So a writer records each
batch it stages in ``.<table>.seatide-pending/`` (durably, before the batch's decision is recorded)
and removes the record once the batch's commit is in the table; a RECREATE_SCHEMA refuses while a
record of another job stands (``blocking``), holding the table's lock alone.

Crashes: a record whose batch is committed (its writer died before removing it) or was staged into a
table dropped since is stale, and removed by the RECREATE that finds it. A record whose batch was
never decided (its driver died between the record and the decision) cannot be told from a decided
one without the other job's store: it blocks until that job's next attempt stages the batch again
(same commit user and identifier: the same record) and commits it, or until the user removes it, as
the refusal says. A writer's commit removes its older records too (batches run in order).
"""

from __future__ import annotations

import json
import os
import socket
import time

from seatide.connectors.paimon import commits
from seatide.connectors.paimon.table_lock import refused_dir, remove, shared_dir, sync_dir


def pending_dir(table_path: str) -> str:
    return os.path.join(os.path.dirname(table_path), f".{os.path.basename(table_path)}.seatide-pending")


def record(table_path: str, part: dict, job: str | None) -> None:
    """``part`` (a staged batch: its commit user, identifier, base snapshot, table) on record, durably."""
    where = pending_dir(table_path)
    name = os.path.join(where, f"{part['user']}{part['identifier']}")
    body = {"user": part["user"], "identifier": part["identifier"], "base": part["base"], "created": part["created"],
            "job": job, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    try:
        shared_dir(where)
        with open(f"{name}.{os.getpid()}.tmp", "w") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(f"{name}.{os.getpid()}.tmp", name)
        sync_dir(where)
    except OSError as exc:
        raise refused_dir(where, f"a writer of batch {part['identifier']}", exc) from None


def committed(table_path: str, user: str, identifier: int) -> None:
    """Batch ``identifier`` of ``user`` is in the table: its record, and the user's older ones, removed."""
    for name, held in _records(table_path):
        if held.get("user") == user and isinstance(held.get("identifier"), int) and held["identifier"] <= identifier:
            remove(name)


def blocking(table_path: str, table, own: str | None, created) -> list[str]:
    """The records of other jobs' batches not in ``table`` (first written at ``created``), described;
    stale records (committed, or staged into a table dropped since) removed. Holding the lock alone."""
    found = []
    for name, held in _records(table_path):
        if commits.of_job(held.get("user", ""), own):
            continue        # the job's own: its store's records say what it owes
        stale = held.get("created") != created or commits.committed(
            table, held.get("user"), held.get("identifier"), held.get("base", 0)) is not None
        if stale:
            remove(name)
            continue
        found.append(f"batch {held.get('identifier')} of job {held.get('job')} (commit user {held.get('user')}, "
                     f"staged by process {held.get('pid')} on {held.get('host')}, record {name})")
    return found


def _records(table_path: str) -> list[tuple[str, dict]]:
    where = pending_dir(table_path)
    try:
        names = sorted(n for n in os.listdir(where) if not n.endswith(".tmp"))
    except OSError:
        return []
    found = []
    for n in names:
        try:
            with open(os.path.join(where, n)) as f:
                found.append((os.path.join(where, n), json.load(f)))
        except (OSError, ValueError):
            continue        # removed meanwhile
    return found


__all__ = ["blocking", "committed", "pending_dir", "record"]
