"""A month of one-second checkpoints, then retention: the store's size before and after.

    .venv/bin/python bench/retention_month.py --data-dir /tmp/month [--store URL] [--days 30]

One STREAMING pipeline, one checkpoint row per second (realistic offsets), written in bulk
into a fresh store (SQLite in the data directory unless ``--store`` names an empty
PostgreSQL database), plus a few events a day. Then the leader's pruning step runs with the
default rules, run after run as the leader would at its ticks, until it reports no backlog.
Prints the size before, how many runs it took and the longest, and the size after (with
the freed space still in the file, then after VACUUM).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time

from sqlalchemy import func, insert, select, text

from seatide import intents
from seatide.coordinator.retention import Pruner, RetentionRules
from seatide.coordinator.service import Coordinator
from seatide.store import schema as s
from seatide.store.db import default_store_url, open_store, record_event

JOB = """
env { job.mode = STREAMING, checkpoint.interval = 1000 }
source { FakeSource { row.num = 10, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


def fill(store, data_dir: str, seconds: int) -> None:
    intents.submit(store, data_dir, text=JOB, job_id="month", actor="bench")
    start = time.time() - seconds
    for base in range(0, seconds, 50_000):
        rows = [dict(job_id="month", incarnation=1, checkpoint_id=i + 1, pipeline_id=1, batch_id=i,
                     kind="CHECKPOINT", status="COMPLETED", created_at=start + i, duration_ms=180, rows=1000,
                     source_offsets=json.dumps({"FakeSource-1": {"split": i * 4, "rows": i * 1000}}),
                     fingerprint="3f9a" * 16, attempt_id=1) for i in range(base, min(base + 50_000, seconds))]
        with store.write() as conn:
            conn.execute(insert(s.checkpoints), rows)
    with store.write() as conn:       # a restart a day
        for _ in range(seconds // 86400):
            for kind in ("ATTEMPT_ASSIGNED", "DRIVER_LAUNCHING", "CHECKPOINT_RESTORED"):
                record_event(conn, kind, "bench", "month", 1, 1)


def _admin(store, statement: str) -> None:
    """Outside any transaction (VACUUM, a WAL checkpoint, ANALYZE)."""
    if store.is_sqlite:
        conn = sqlite3.connect(store.url.split("///", 1)[1], isolation_level=None)
        conn.execute(statement)
        conn.close()
    else:
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(statement))


def size_mib(store) -> float:
    if store.is_sqlite:
        _admin(store, "PRAGMA wal_checkpoint(TRUNCATE)")
        path = store.url.split("///", 1)[1]
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 2**20
    with store.read() as conn:
        return conn.execute(text("SELECT pg_database_size(current_database())")).scalar() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--store")
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    store = open_store(args.store or default_store_url(args.data_dir))
    began = time.time()
    fill(store, args.data_dir, args.days * 86400)
    if not store.is_sqlite:    # a table grown over a month has been analyzed by autovacuum; a bulk load not yet
        _admin(store, "ANALYZE")
    print(f"wrote {args.days * 86400} checkpoint rows in {time.time() - began:.0f} s; "
          f"store {size_mib(store):.1f} MiB")
    leader = Coordinator(store, node_id="bench")
    pruner = Pruner(store, args.data_dir, RetentionRules())
    runs, longest, began = 0, 0.0, time.time()
    while True:
        assert leader.lease.tick(), "lost the lease"
        started = time.time()
        done = pruner.run(leader.lease.epoch, time.time())
        longest, runs = max(longest, time.time() - started), runs + 1
        if not done.more:
            break
    with store.read() as conn:
        left = conn.execute(select(func.count()).select_from(s.checkpoints)).scalar()
    print(f"pruned in {runs} runs, {time.time() - began:.0f} s in all, longest run {longest * 1000:.0f} ms; "
          f"{left} rows left; store {size_mib(store):.1f} MiB (freed pages kept)")
    store.dispose()
    _admin(store, "VACUUM" if store.is_sqlite else "VACUUM FULL")
    print(f"after VACUUM: {size_mib(store):.2f} MiB")


if __name__ == "__main__":
    main()
