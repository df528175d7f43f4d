"""Iceberg table maintenance: expire snapshots, rewrite small files, remove orphan files.

A streaming job with 1 s checkpoints commits up to 86,400 snapshots a day. The sink runs
these after its commits when its ``iceberg.maintenance.*`` options say so, and they can be
run by hand on any table of a hadoop or JDBC catalog::

    python -m seatide.connectors.iceberg.maintenance --catalog '{"type": "hadoop", "warehouse": "/wh"}' \\
        --table ns.t expire --older-than-ms 3600000 --retain-last 100
    python -m seatide.connectors.iceberg.maintenance --catalog ... --table ns.t rewrite --target-bytes 134217728

* **expire**: drops from the metadata the snapshots older than the limit, always keeping the
  newest ``retain_last`` and every branch or tag head; then deletes the manifest lists,
  manifests and data files only expired snapshots referenced (local files).
* **rewrite**: Spark reads the head's data files smaller than the target (at least two of
  them in a partition) and writes them as fewer, larger files; one ``replace`` snapshot swaps
  them (rows unchanged). It runs between batches, so it never races the sink's own commits;
  another writer's commit in between makes it give up (CommitFailedException) for this round.
  A head with delete files (merge-on-read) is rewritten whole: every data file with the deletes
  applied, and the delete files removed in the same ``replace`` snapshot, so any reader
  (pyiceberg's scan among them) reads the result. The snapshot carries the branch's newest
  batch mark (``commits.carried_mark``): expiry that keeps it and drops the batches before it
  loses no mark a replay needs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
import uuid

from seatide.connectors.iceberg.commits import branch_head, carried_mark, commit_files, without_retries
from seatide.connectors.iceberg.datafiles import data_root, describe, local_path, write_files
from seatide.connectors.iceberg.deletes import plan, read

log = logging.getLogger(__name__)


def _snapshot_files(table, snapshot) -> tuple[set[str], set[str], set[str]]:
    """(manifest lists, manifests, data and delete files) a snapshot references."""
    manifests, files = set(), set()
    for manifest in snapshot.manifests(table.io):
        manifests.add(manifest.manifest_path)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            files.add(entry.data_file.file_path)
    return {snapshot.manifest_list}, manifests, files


def expire_snapshots(catalog, identifier, older_than_ms: int, retain_last: int) -> list[int]:
    """Expire snapshots older than ``older_than_ms`` beyond the newest ``retain_last``; returns their ids."""
    from pyiceberg.exceptions import CommitFailedException

    table = catalog.load_table(identifier)
    metadata = table.metadata
    protected = {ref.snapshot_id for ref in metadata.refs.values()}
    newest = sorted(metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True)
    keep = {s.snapshot_id for s in newest[:retain_last]} | protected
    limit = int(time.time() * 1000) - older_than_ms
    expired = [s for s in newest if s.snapshot_id not in keep and s.timestamp_ms < limit]
    if not expired:
        return []
    kept = [s for s in metadata.snapshots if s.snapshot_id not in {e.snapshot_id for e in expired}]
    try:
        without_retries(table).maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expired]).commit()
    except CommitFailedException:
        log.info("Iceberg maintenance: %s changed while expiring; trying next time", identifier)
        return []
    _delete_unreferenced(table, expired, kept)
    _prune_metadata_files(catalog.load_table(identifier))
    log.info("Iceberg maintenance: expired %d snapshots of %s", len(expired), ".".join(identifier))
    return [s.snapshot_id for s in expired]


def _delete_unreferenced(table, expired: list, kept: list) -> None:
    """Delete the local files only expired snapshots referenced (Iceberg's expireSnapshots cleanup)."""
    live_lists, live_manifests, live_files = set(), set(), set()
    for snapshot in kept:
        lists, manifests, files = _snapshot_files(table, snapshot)
        live_lists |= lists
        live_manifests |= manifests
        live_files |= files
    gone_lists, gone_manifests, gone_files = set(), set(), set()
    for snapshot in expired:
        try:
            lists, manifests, files = _snapshot_files(table, snapshot)
        except FileNotFoundError:
            continue
        gone_lists |= lists - live_lists
        gone_manifests |= manifests - live_manifests
        gone_files |= files - live_files
    for path in (*gone_files, *gone_manifests, *gone_lists):
        try:
            os.remove(local_path(path))
        except (FileNotFoundError, ValueError):
            pass


_METADATA_VERSION = re.compile(r"^v?(\d+)[.-]")


def _prune_metadata_files(table) -> int:
    """Delete the table's metadata JSON files older than the oldest one its metadata log keeps
    (``write.metadata.previous-versions-max``, 100 by default): one is written per commit."""
    kept = [table.metadata_location, *(entry.metadata_file for entry in table.metadata.metadata_log)]
    versions = [int(m.group(1)) for m in (_METADATA_VERSION.match(os.path.basename(p)) for p in kept) if m]
    if not versions:
        return 0
    oldest = min(versions)
    directory = os.path.dirname(local_path(table.metadata_location))
    removed = 0
    for name in os.listdir(directory):
        match = _METADATA_VERSION.match(name)
        if match and name.endswith(".metadata.json") and int(match.group(1)) < oldest:
            os.remove(os.path.join(directory, name))
            removed += 1
    return removed


def rewrite_small_files(spark, catalog, identifier, branch: str | None, target_bytes: int) -> tuple[int, int]:
    """Compact the branch head's small data files; returns (files removed, files added)."""
    from pyiceberg.exceptions import CommitFailedException

    table = catalog.load_table(identifier)
    metadata = table.metadata
    head = branch_head(metadata, branch)
    if head is None:
        return 0, 0
    found = plan(table, head.snapshot_id)
    if found.deletes:
        # deletes may apply to any data file: every one is rewritten with them applied, and the
        # delete files go (the new files' higher sequence number would put them out of reach anyway)
        small, removed = [f.file for f in found.data], [f.file for f in (*found.data, *found.deletes)]
    else:
        by_partition: dict = {}
        for live in found.data:
            if live.file.file_size_in_bytes < target_bytes and live.file.spec_id == metadata.default_spec_id:
                by_partition.setdefault(tuple(live.file.partition), []).append(live.file)
        small = [f for files in by_partition.values() if len(files) > 1 for f in files]
        removed = small
        if not small:
            return 0, 0
    from seatide.connectors.iceberg.schema import spark_struct

    struct = spark_struct(metadata.schema())
    total = sum(f.file_size_in_bytes for f in small)
    pieces = max(1, -(-total // target_bytes))
    rows = read(spark, table, found, struct, only={f.file_path for f in small})
    columns = [metadata.schema().find_column_name(f.source_id) for f in metadata.spec().fields]
    directory = os.path.join(data_root(metadata), f"seatide-rewrite-{uuid.uuid4().hex}")
    added = describe(metadata, write_files(spark, rows.coalesce(int(pieces)), metadata, directory, columns))
    try:
        commit_files(table, branch, {"seatide.maintenance": "rewrite", **carried_mark(metadata, branch)}, added,
                     removed, rewrite=bool(found.deletes))
    except CommitFailedException:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
        log.info("Iceberg maintenance: %s changed while rewriting; trying next time", ".".join(identifier))
        return 0, 0
    log.info("Iceberg maintenance: rewrote %d files of %s into %d (%d delete files folded in)", len(small),
             ".".join(identifier), len(added), len(removed) - len(small))
    return len(removed), len(added)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seatide.connectors.iceberg.maintenance",
                                     description="Expire snapshots or rewrite small files of an Iceberg table")
    parser.add_argument("--catalog", required=True, help="iceberg.catalog.config as JSON")
    parser.add_argument("--catalog-name", default="default")
    parser.add_argument("--table", required=True, help="namespace.table")
    parser.add_argument("--branch", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    expire = sub.add_parser("expire")
    expire.add_argument("--older-than-ms", type=int, required=True)
    expire.add_argument("--retain-last", type=int, default=100)
    rewrite = sub.add_parser("rewrite")
    rewrite.add_argument("--target-bytes", type=int, default=128 * 1024 * 1024)
    args = parser.parse_args(argv)
    from seatide.connectors.iceberg.catalogs import CatalogConfigError, check_config, load_catalog

    try:
        config = json.loads(args.catalog)
        check_config(config)
    except (ValueError, CatalogConfigError) as exc:
        print(f"--catalog: {exc}", file=sys.stderr)
        return 2
    namespace, _, name = args.table.rpartition(".")
    if not namespace:
        print("--table must be namespace.table", file=sys.stderr)
        return 2
    catalog = load_catalog(args.catalog_name, config)
    if args.command == "expire":
        ids = expire_snapshots(catalog, (namespace, name), args.older_than_ms, args.retain_last)
        print(f"expired {len(ids)} snapshots")
        return 0
    spark = _spark()
    removed, added = rewrite_small_files(spark, catalog, (namespace, name), args.branch, args.target_bytes)
    print(f"rewrote {removed} files into {added}")
    return 0


def _spark():
    from pyspark.sql import SparkSession

    return SparkSession.builder.master("local[2]").appName("seatide-iceberg-maintenance").getOrCreate()


__all__ = ["expire_snapshots", "main", "rewrite_small_files"]


if __name__ == "__main__":
    sys.exit(main())
