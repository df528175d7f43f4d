"""One micro-batch = at most one Iceberg snapshot, found again by its transaction id.

The Iceberg catalog's commit is the batch's commit point (as Flink's Iceberg sink, which keeps
its checkpoint id in the snapshot summary). Each snapshot SeaTide commits carries:

    seatide.transaction-id   the batch's transaction id (run, pipeline, sink, lineage, batch)
    seatide.staging          the directory its data files were written in

Before committing, the writer walks the branch back from its head to the newest snapshot of
the same lineage (the transaction id without its batch number): a snapshot there with this
batch or a later one means the batch is committed (batches of a lineage commit in order), and
nothing is written. The commit itself requires that the branch head is still the snapshot the
check saw (Iceberg's ``assert-ref-snapshot-id``), so a racing attempt of the same batch (a
zombie driver, a replay) loses the race with ``CommitFailedException``, looks again, finds the
batch, and commits nothing. pyiceberg's own retry (which rebases onto the new head without
that look) is turned off for these commits.

Expiring snapshots keeps the branch head, so the newest snapshot of a running lineage stays
findable; a job that other writers outpace by more than the retained snapshots could lose
the mark, which is why maintenance keeps ``iceberg.maintenance.retain-last`` snapshots.

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


def branch_head(metadata, branch: str | None):
    """The snapshot ``branch`` stands at; a branch that does not exist yet stands at main's
    current snapshot, where its first commit starts it (Iceberg's ``latestSnapshot``)."""
    name = branch or "main"
    if name not in metadata.refs:
        return metadata.current_snapshot()
    return metadata.snapshot_by_name(name)


def committed_snapshot(metadata, branch: str | None, transaction_id: str):
    """The snapshot that committed ``transaction_id``'s batch (or a later batch of its lineage)
    on ``branch``, None when the batch is not committed."""
    lineage, number = lineage_and_batch(transaction_id)
    snapshot = branch_head(metadata, branch)
    while snapshot is not None:
        found = (snapshot.summary.additional_properties if snapshot.summary else {}).get(TRANSACTION_KEY)
        if found is not None:
            if found == transaction_id:
                return snapshot
            other_lineage, other_number = lineage_and_batch(found)
            if other_lineage == lineage:
                return snapshot if other_number >= number else None
        if snapshot.parent_snapshot_id is None:
            return None
        snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    return None


def without_retries(table):
    """``table`` whose transactions commit once: pyiceberg's retry would skip our check."""
    props = {**table.metadata.properties, "commit.retry.num-retries": "0"}
    table.metadata = table.metadata.model_copy(update={"properties": props})
    return table


def commit_files(table, branch: str | None, summary: dict, added: list, removed: list, rewrite: bool = False):
    """Commit ``added``/``removed`` files (data or delete files) as one snapshot on ``branch`` with
    ``summary``, once: ``CommitFailedException`` when the branch moved since ``table`` was loaded
    (no rebase). ``row_delta``'s producer writes it (pyiceberg's own write data manifests only)."""
    from seatide.connectors.iceberg.row_delta import RowDelta

    tx = without_retries(table).transaction()
    RowDelta(tx, branch or "main", summary, added, removed, rewrite=rewrite).commit()
    return tx.commit_transaction()


def commit_snapshot(table, branch: str | None, transaction_id: str, staging: str, added: list, removed: list,
                    extra_summary: dict | None = None):
    """A batch's snapshot: ``commit_files`` with the batch's mark in the summary."""
    summary = {TRANSACTION_KEY: transaction_id, STAGING_KEY: staging, **(extra_summary or {})}
    return commit_files(table, branch, summary, added, removed)


def backoff(attempt: int) -> None:
    time.sleep(min(0.05 * (2 ** attempt), 2.0) * (0.5 + random.random()))


__all__ = ["COMMIT_ATTEMPTS", "STAGING_KEY", "TRANSACTION_KEY", "backoff", "branch_head", "commit_files",
           "commit_snapshot", "committed_snapshot", "lineage_and_batch", "without_retries"]
