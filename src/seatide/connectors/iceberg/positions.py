"""Positions in an Iceberg table's history, for reading it in micro-batches (and checkpointing).

A position is ``{"snapshot": S, "done": k, "scan": bool}``: every file unit of the snapshots
before S on the branch is read, and the first ``k`` units of S. A snapshot's units are:

* with ``scan`` (the first snapshot of TABLE_SCAN_THEN_INCREMENTAL, or a bounded read of one
  snapshot): every live data file of S;
* otherwise the data files S added, when S is an ``append``; other operations (overwrite,
  delete, replace: compactions, copy-on-write changes) add none here, as Iceberg's own
  incremental append scan skips them (merge-on-read changes are ``overwrite`` or ``delete``).

A scanned snapshot with delete files is refused (``HistoryError``): a micro-batch's files are
read whole by Python workers, where deletes are not applied; a plain BATCH read applies them.

``S = None`` with ``done = -1`` is the position before the branch's first snapshot. Units are
listed in a fixed order (by path) so that a replayed micro-batch reads the same files.
"""

from __future__ import annotations

from dataclasses import dataclass


# ``done`` of a snapshot read to its end without listing its files (the start of an incremental read,
# whose snapshot may have expired since)
DONE = 2 ** 31


class HistoryError(ValueError):
    """The table's history no longer holds a position (expired, rolled back)."""


@dataclass(frozen=True)
class Unit:
    path: str
    rows: int


def position(snapshot: int | None, done: int, scan: bool = False) -> dict:
    return {"snapshot": snapshot, "done": done, "scan": scan}


def chain(metadata, head_id: int | None) -> list[int]:
    """Snapshot ids from the oldest ancestor of ``head_id`` to it."""
    ids = []
    snapshot = metadata.snapshot_by_id(head_id) if head_id is not None else None
    while snapshot is not None:
        ids.append(snapshot.snapshot_id)
        snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return ids[::-1]


def units(table, snapshot_id: int, scan: bool) -> list[Unit]:
    metadata = table.metadata
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise HistoryError(f"snapshot {snapshot_id} is no longer in the table (expired?); restart the read from "
                           "a snapshot that exists")
    if scan:
        from seatide.connectors.iceberg.deletes import plan

        live = plan(table, snapshot_id)
        if live.deletes:
            raise HistoryError(
                f"table {'.'.join(table.name()[-2:])} holds {len(live.deletes)} delete files (merge-on-read) in "
                f"snapshot {snapshot_id}; a micro-batch read (STREAMING, or BATCH with checkpoint.interval) reads "
                "whole data files and cannot apply them. Read it in a BATCH job without checkpoint.interval, which "
                "applies them, or compact the table first (python -m seatide.connectors.iceberg.maintenance "
                "--catalog ... --table ns.t rewrite)")
        found = [Unit(f.file.file_path, f.file.record_count) for f in live.data]
    else:
        operation = snapshot.summary.operation.value if snapshot.summary else "append"
        if operation != "append":
            return []
        found = []
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot_id or manifest.content.value != 0:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.snapshot_id == snapshot_id and entry.status.value == 1:    # ADDED
                    found.append(Unit(entry.data_file.file_path, entry.data_file.record_count))
    return sorted(found, key=lambda u: u.path)


def advance(table, start: dict, head_id: int | None, max_rows: int | None) -> dict:
    """The position after admitting up to ``max_rows`` rows (at least one unit) from ``start``
    toward ``head_id`` (all of them when ``max_rows`` is None)."""
    pos = dict(start)
    ids = chain(table.metadata, head_id)
    budget = max_rows
    while True:
        current = pos["snapshot"]
        if current is not None and 0 <= pos["done"] < DONE:
            listed = units(table, current, pos["scan"])
            if pos["done"] < len(listed):
                for unit in listed[pos["done"]:]:
                    if budget is not None and budget <= 0 and pos != start:
                        return pos
                    pos = position(current, pos["done"] + 1, pos["scan"])
                    if budget is not None:
                        budget -= unit.rows
                if budget is not None and budget <= 0:
                    return pos
        following = _next(ids, current)
        if following is None:
            return pos
        pos = position(following, 0, False)


def _next(ids: list[int], current: int | None) -> int | None:
    if current is None:
        return ids[0] if ids else None
    try:
        index = ids.index(current)
    except ValueError:
        raise HistoryError(f"snapshot {current} (the read's checkpointed position) is not an ancestor of the "
                           "branch head any more; the table was rolled back or the snapshot expired") from None
    return ids[index + 1] if index + 1 < len(ids) else None


def between(table, start: dict, end: dict) -> list[Unit]:
    """The units after ``start`` up to and including ``end``."""
    if start == end:
        return []
    out: list[Unit] = []
    ids = chain(table.metadata, end["snapshot"])
    pos = dict(start)
    while True:
        current = pos["snapshot"]
        if current is not None:
            if 0 <= pos["done"] < DONE:
                listed = units(table, current, pos["scan"])
                stop = end["done"] if current == end["snapshot"] else len(listed)
                out.extend(listed[pos["done"]:stop])
            if current == end["snapshot"]:
                return out
        following = _next(ids, current)
        if following is None:
            return out
        pos = position(following, 0, False)


__all__ = ["DONE", "HistoryError", "Unit", "advance", "between", "chain", "position", "units"]
