"""One micro-batch = at most one Iceberg snapshot, found again by its transaction id.

The Iceberg catalog's commit is where a decided batch becomes visible (as Flink's Iceberg sink,
which keeps its checkpoint id in the snapshot summary). Each snapshot of a batch carries:

    seatide.transaction-id   the batch's transaction id (run, pipeline, sink, lineage, batch)
    seatide.staging          the directory its data files were written in

**The mark.** Before committing, the writer looks for the batch among the snapshots committed
since the batch was staged (sequence numbers above the table's last one then, its *base
sequence*): a snapshot with a mark of the same lineage (the transaction id without its batch
number) and this batch or a later one means the batch is committed (batches of a lineage commit
in order), and nothing is written. The commit itself requires that the branch head is still the
snapshot the writer saw (``assert-ref-snapshot-id``), so a racing attempt of the same batch (a
zombie driver, a replay) loses the race with ``CommitFailedException``, looks again, finds the
batch, and commits nothing. pyiceberg's own retry (which rebases onto the new head without that
look) is turned off.

**Keeping the mark.** Not finding the mark proves the batch uncommitted only if no snapshot
committed since the base sequence is gone: Iceberg numbers snapshots one by one, so a number
missing from that range is a snapshot expired since, which may have been the batch's, and the
look raises ``MarkLost`` instead of guessing (guessing "not committed" commits the batch twice;
a walk along parent ids cannot tell, since pyiceberg's expiry clears the parent of a snapshot
whose parent it expires). SeaTide's own snapshots that are not a batch (a compaction, DROP_DATA)
carry the newest mark of the branch forward, so expiry that keeps them keeps the mark; expiry
always keeps the branch head and ``iceberg.maintenance.retain-last`` (at least 2) newest snapshots.

**A missing branch** is read as Iceberg reads one: it stands at main's current snapshot, and the
first commit to it creates it there (on a table without snapshots: with that commit alone).
"""

from __future__ import annotations

import logging
import random
import time

log = logging.getLogger(__name__)

TRANSACTION_KEY = "seatide.transaction-id"
STAGING_KEY = "seatide.staging"
COMMIT_ATTEMPTS = 20


def lineage_and_batch(transaction_id: str) -> tuple[str, int]:
    prefix, _, number = transaction_id.rpartition("_")
    return prefix, int(number) if number.isdigit() else -1


class MarkLost(RuntimeError):
    """Whether a batch was committed cannot be told: the history it would be in was expired."""


def branch_head(metadata, branch: str | None):
    """The snapshot ``branch`` stands at; a branch that does not exist yet stands at main's
    current snapshot, where its first commit starts it (Iceberg's ``latestSnapshot``)."""
    name = branch or "main"
    if name not in metadata.refs:
        return metadata.current_snapshot()
    return metadata.snapshot_by_name(name)


def _mark(snapshot) -> str | None:
    return (snapshot.summary.additional_properties if snapshot.summary else {}).get(TRANSACTION_KEY)


def committed_snapshot(metadata, branch: str | None, transaction_id: str, base_sequence: int | None = None):
    """The snapshot that shows ``transaction_id``'s batch committed (its own, or one with a later
    batch of its lineage, or one carrying such a mark), None when the batch is not committed.

    ``base_sequence``: the table's last sequence number when the batch was staged (None: unknown,
    a batch decided before parts recorded it, or a format 1 table). Raises ``MarkLost`` when a
    snapshot committed since then is gone (expired) and no mark shows the batch."""
    lineage, number = lineage_and_batch(transaction_id)
    if base_sequence is None or metadata.format_version < 2:
        return _committed_on_branch(metadata, branch, lineage, number, transaction_id)
    since = [s for s in metadata.snapshots if (s.sequence_number or 0) > base_sequence]
    found = [s for s in since if _shows(_mark(s), lineage, number)]
    if found:
        return next((s for s in found if _mark(s) == transaction_id), found[0])
    missing = set(range(base_sequence + 1, metadata.last_sequence_number + 1)) - {s.sequence_number for s in since}
    if missing:
        raise MarkLost(
            f"cannot tell whether batch {number} ({transaction_id}) was committed: {len(missing)} snapshots "
            f"committed since it was staged (sequence numbers {min(missing)}-{max(missing)}) were expired, and its "
            "own may have been one of them. Expiry by another writer (or iceberg.maintenance.retain-last) kept too "
            f"few snapshots; keep more. If the table's history shows a snapshot whose summary has {TRANSACTION_KEY} "
            f"= {transaction_id}, the batch is in the table; restore the table to a snapshot before it, then resume")
    return None


def _shows(mark: str | None, lineage: str, number: int) -> bool:
    if mark is None:
        return False
    other_lineage, other_number = lineage_and_batch(mark)
    return other_lineage == lineage and other_number >= number


def _committed_on_branch(metadata, branch: str | None, lineage: str, number: int, transaction_id: str):
    """The walk back from the branch head to the lineage's newest mark (parts that name no base sequence)."""
    snapshot = branch_head(metadata, branch)
    while snapshot is not None:
        found = _mark(snapshot)
        if found is not None and lineage_and_batch(found)[0] == lineage:
            return snapshot if found == transaction_id or _shows(found, lineage, number) else None
        if snapshot.parent_snapshot_id is None:
            return None
        snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    return None


def written_by_run(metadata, run: str) -> bool:
    """Whether a snapshot of the table carries a mark of the job run ``run`` (its batches'
    transaction ids are ``T_<run>_<pipeline>_<sink>_<lineage>_<batch>``, ``runtime.sink_runs``;
    SeaTide's other snapshots carry the newest mark forward): the run committed rows into it."""
    prefix = f"T_{run}_"
    for snapshot in metadata.snapshots:
        mark = _mark(snapshot) or ""
        if mark.startswith(prefix) and len(mark[len(prefix):].split("_")) == 4:    # not run <run>_x's
            return True
    return False


def carried_mark(metadata, branch: str | None) -> dict:
    """The newest mark on ``branch`` as a snapshot summary entry: a SeaTide snapshot that is not a
    batch (a compaction, DROP_DATA) carries it, so that the batches before it stay found when
    expiry keeps it and drops theirs."""
    snapshot = branch_head(metadata, branch)
    while snapshot is not None:
        found = _mark(snapshot)
        if found is not None:
            return {TRANSACTION_KEY: found}
        if snapshot.parent_snapshot_id is None:
            break
        snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    return {}


def without_retries(table):
    """``table`` whose transactions commit once: pyiceberg's retry would skip our check."""
    props = {**table.metadata.properties, "commit.retry.num-retries": "0"}
    table.metadata = table.metadata.model_copy(update={"properties": props})
    return table


def _transaction(table):
    """``table.transaction()`` whose ``table_metadata`` is built once per set of staged updates.

    pyiceberg's ``Transaction.table_metadata`` applies the staged updates to the table's metadata
    and deep-copies the result on every access, and a snapshot producer reads it about twenty
    times per commit: a copy of every snapshot the table keeps, each time (60 ms a commit at 40
    snapshots, growing with every batch a table without expiry keeps). The metadata is immutable
    (pyiceberg makes a new one for each update), so the same result serves until the updates or
    the table's metadata change."""
    from pyiceberg.table import Transaction

    class _Transaction(Transaction):
        _built = None

        @property
        def table_metadata(self):
            base, updates = self._table.metadata, self._updates
            built = self._built
            if built is None or built[0] is not base or built[1] is not updates:
                built = self._built = (base, updates, Transaction.table_metadata.fget(self))
            return built[2]

    return _Transaction(table)


def commit_files(table, branch: str | None, summary: dict, added: list, removed: list, rewrite: bool = False):
    """Commit ``added``/``removed`` files (data or delete files) as one snapshot on ``branch`` with
    ``summary``, once: ``CommitFailedException`` when the branch moved since ``table`` was loaded
    (no rebase). ``row_delta``'s producer writes it (pyiceberg's own write data manifests only)."""
    from seatide.connectors.iceberg.row_delta import RowDelta

    tx = _transaction(without_retries(table))
    RowDelta(tx, branch or "main", summary, added, removed, rewrite=rewrite).commit()
    return tx.commit_transaction()


def commit_snapshot(table, branch: str | None, transaction_id: str, staging: str, added: list, removed: list,
                    extra_summary: dict | None = None):
    """A batch's snapshot: ``commit_files`` with the batch's mark in the summary."""
    summary = {TRANSACTION_KEY: transaction_id, STAGING_KEY: staging, **(extra_summary or {})}
    return commit_files(table, branch, summary, added, removed)


def backoff(attempt: int) -> None:
    time.sleep(min(0.05 * (2 ** attempt), 2.0) * (0.5 + random.random()))


__all__ = ["COMMIT_ATTEMPTS", "MarkLost", "STAGING_KEY", "TRANSACTION_KEY", "backoff", "branch_head",
           "carried_mark", "commit_files", "commit_snapshot", "committed_snapshot", "lineage_and_batch",
           "without_retries", "written_by_run"]
