"""A Paimon table's batches staged and not yet committed, on record in the warehouse beside the table.

A writer's batch is decided in its job's store before Paimon's commit names its files: a late
RECREATE_SCHEMA of another job saw no snapshot of it, and the writer's shared hold of the table's
lock went with its driver, or with a publish that merely raised (the batch still decided). Carried
out then, the drop took the decided batch for good (outside review 2, H1). So a writer records each
batch it stages in ``.<table>.seatide-pending/`` (durably, before the batch's decision is recorded)
and removes the record once the batch's commit is in the table; a RECREATE_SCHEMA refuses while a
record of another job stands (``blocking``), holding the table's lock alone.

Decided or not, told without the other job's store (another deployment's, maybe): each staging has a
record of its own, written unmarked; its stager marks it ``deciding`` (``record``), durably,
right BEFORE it writes the batch's decision to its store (``SinkTargets.deciding``), and holds the
table's lock shared from staging through the decision to the publish, or until the batch fails and it
lets go (``PaimonTargets.let_go``). A RECREATE_SCHEMA looks at the records holding the lock alone, so
no stager is between staging and letting go then: an unmarked record's stager let go, or died (its
kernel let go for it), before marking, so before any decision. Such a batch is never decided later:
the protocol decides only parts staged under the hold it still has (a replay of a decided batch only
publishes; the next attempt stages afresh, into a record of its own), so the record protects nothing
and is removed. A marked record may be decided, and blocks. The races, closed by the lock:

* a writer marking while the RECREATE looks: it marks under its shared hold, the look is under the
  lock alone; the mark is either on disk before the look (blocks) or after the drop (its hold came
  after it, so did its staging: into the recreated table);
* a death between the store's decision and the mark cannot be: the mark comes first. A death between
  the mark and the decision leaves a marked record of a batch never decided: it blocks (as every
  record did before), until the job's next attempt commits that batch (``committed`` removes the
  user's records up to it) or the user removes it, as the refusal says;
* a zombie staging the batch its replacement marked (one commit user and identifier): its record is
  its own and leaves the mark alone, where one record per batch was overwritten unmarked.

Crashes: a record whose batch is committed (its writer died before removing it; or a zombie's, staged
after its replacement committed the batch), or whose user committed a later batch, or staged into a
table dropped since, is stale, and removed by the RECREATE that finds it, as is a record half-written
(``.tmp``) by a writer killed mid-write. A marked record whose batch's snapshots expired before it was
found committed or not blocks, its description saying so and how to go on. A record of an earlier
SeaTide (no mark) counts as marked. A writer's commit removes its older records too (batches run in order).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time

from seatide.connectors.paimon import commits
from seatide.connectors.paimon.table_lock import refused_dir, remove, shared_dir, sync_dir


def pending_dir(table_path: str) -> str:
    return os.path.join(os.path.dirname(table_path), f".{os.path.basename(table_path)}.seatide-pending")


def record(table_path: str, part: dict, job: str | None, deciding: bool = False, name: str | None = None) -> str:
    """``part`` (a staged batch: its commit user, identifier, base snapshot, table) on record, durably;
    the record's path. ``deciding``: the part is about to be decided, its record (``name``, the one
    written at staging) marked so. The caller holds the table's lock shared (the module's doc)."""
    where = pending_dir(table_path)
    name = name or os.path.join(where, f"{part['user']}{part['identifier']}.{secrets.token_hex(4)}")
    body = {"user": part["user"], "identifier": part["identifier"], "base": part["base"], "created": part["created"],
            "job": job, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time(), "deciding": deciding}
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
    return name


def committed(table_path: str, user: str, identifier: int) -> None:
    """Batch ``identifier`` of ``user`` is in the table: its record, and the user's older ones, removed."""
    for name, held in _records(table_path):
        if held.get("user") == user and isinstance(held.get("identifier"), int) and held["identifier"] <= identifier:
            remove(name)


def blocking(table_path: str, table, own: str | None, created) -> list[str]:
    """The records of other jobs' batches not in ``table`` (first written at ``created``) that may be
    decided, described; stale records (committed, or staged into a table dropped since), records never
    marked deciding and half-written ones (a writer killed mid-write) removed. Only holding the table's
    lock alone: an unmarked record is never decided only while no stager holds it (the module's doc)."""
    _remove_unfinished(table_path)
    found, newest = [], {}
    for name, held in _records(table_path):
        user, identifier, base = held.get("user"), held.get("identifier"), held.get("base", 0)
        if commits.of_job(user or "", own):
            continue        # the job's own: its store's records say what it owes
        never_decided = held.get("deciding") is False       # its stager let go before marking it
        if user not in newest:
            newest[user] = commits.newest_of(table, user)
        last, oldest = newest[user]
        if never_decided or held.get("created") != created or _committed(identifier, last):
            remove(name)
            continue
        said = (f"batch {identifier} of job {held.get('job')} (commit user {user}, staged by process "
                f"{held.get('pid')} on {held.get('host')}, record {name}")
        if last is None and isinstance(base, int) and oldest > base + 1:   # a later commit of the user would tell
            said += (f"; whether it was committed cannot be told, snapshots {base + 1} to {oldest - 1} having "
                     f"expired: if that job has ended, or its batch {identifier}'s rows are in the table, it was")
        found.append(said + ")")
    return found


def _committed(identifier, last) -> bool:
    """Batch ``identifier`` of a commit user whose newest snapshot kept has identifier ``last`` is in the
    table, or was: batches of a user are committed in order, one decision per identifier, so a batch at or
    below the user's newest commit was committed (at any snapshot: a zombie's record, staged after its
    replacement's commit of the batch, is based after it) or never will be decided. A decided batch not
    committed yet is above every commit of its user, so its record stays."""
    return isinstance(identifier, int) and isinstance(last, int) and identifier <= last


def _remove_unfinished(table_path: str) -> None:
    """Records half-written by a writer killed mid-write removed; holding the table's lock alone, so no
    writer is writing one."""
    where = pending_dir(table_path)
    try:
        names = [n for n in os.listdir(where) if n.endswith(".tmp")]
    except OSError:
        return
    for n in names:
        remove(os.path.join(where, n))


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
