"""Postgres-CDC draining a backlog: time linear in its size, memory bounded.

    PYTHONPATH=src .venv/bin/python bench/cdc_backlog.py [--sizes 100000,300000,1000000] [--max-rows 100000]
                                                        [--transaction 1000]

For each size N: a private PostgreSQL (wal_level = logical), a table, the source's slot
created, then N inserts committed in transactions of ``--transaction`` rows while the
source is stopped: a backlog, as after a long snapshot or a stopped job. Then the source's
own reader drains it the way Spark calls it (latestOffset -> partitions -> read -> commit,
``--max-rows`` changes per batch), in a child process of its own so that its peak resident
memory is the drain's. The baseline in the same run is the server alone decoding the same
backlog once (``pg_logical_slot_peek_binary_changes`` counted in SQL, nothing sent), so the
report is a ratio per size: linear when it stays flat, quadratic when it grows with N.
One transaction of ``--huge`` rows is drained too, to show a batch's memory does not grow
with the size of one transaction either. Within each run the batches of the last quarter
are timed against those of the first (``last_to_first``): about 1 when each batch costs its
own changes, growing with N when every batch re-reads the backlog. Writes
bench/results/cdc_backlog.json.

A slot's restart point (where the server starts decoding for any stream) moves only to a
record of the running transactions, which PostgreSQL logs every 15 s while it is busy and at
every checkpoint; until one passes, each stream decodes from the old restart point again. A
backlog written over minutes has many such records; one written in seconds by this bench has
none, so the bench logs one (CHECKPOINT) every 100,000 rows, as a server writing that fast
for 15 s would.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(__file__), "..")
RESTART_POINT_EVERY = 100_000
sys.path.insert(0, os.path.join(ROOT, "src"))


def drain(port: int, max_rows: int) -> dict:
    """In a child process: drain the slot with the reader, as Spark drives it."""
    from seatide.connectors.postgres_cdc.stream import PostgresCdcReader
    from seatide.connectors.postgres_cdc.tables import describe

    import psycopg

    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="bench", autocommit=True) as conn:
        table = describe(conn, "public", "events", None)
        slot_lsn = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                "WHERE slot_name = 'bench'").fetchone()[0]
    from seatide.connectors.postgres_cdc.pgoutput import parse_lsn

    reader = PostgresCdcReader({
        "host": "127.0.0.1", "port": port, "database": "bench", "user": "postgres", "password": "",
        "connect_timeout_ms": 10000, "time_zone": "UTC", "spark_time_zone": "UTC",
        "tables": [table.to_json()], "columns": [c.name for c in table.columns], "slot": "bench",
        "startup_mode": "latest", "split_size": 1000, "fetch_size": 1000, "max_rows": max_rows})
    reader._checked = True
    start = {"lsn": parse_lsn(slot_lsn), "snapshot": None, "splits": []}
    began, rows, done, each = time.perf_counter(), 0, None, []
    while True:
        batch_began = time.perf_counter()
        end = reader.latestOffset(start)
        if done is not None:        # as Spark does: batch N is confirmed after N + 1 is planned
            reader.commit(done)
        if end == start or end.get("changes") == 0:
            break
        for part in reader.partitions(start, end):
            for batch in reader.read(part):
                rows += batch.num_rows
        each.append(time.perf_counter() - batch_began)
        start, done = end, end
    seconds = time.perf_counter() - began
    reader.stop()
    quarter = max(1, len(each) // 4)
    return {"rows": rows, "batches": len(each), "seconds": seconds,
            "last_to_first": round(sum(each[-quarter:]) / sum(each[:quarter]), 2),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure(server, size: int, per_transaction: int, max_rows: int) -> dict:
    with server.connect() as admin:
        admin.execute("DROP DATABASE IF EXISTS bench WITH (FORCE)")
        admin.execute("CREATE DATABASE bench")
    with server.connect("bench") as conn:
        conn.execute("CREATE TABLE events (id bigint PRIMARY KEY, amount numeric(12, 2), payload text)")
        conn.execute("CREATE PUBLICATION bench FOR TABLE events")
        conn.execute("SELECT pg_create_logical_replication_slot('bench', 'pgoutput')")
        for first in range(0, size, per_transaction):
            conn.execute("INSERT INTO events SELECT g, g / 100.0, 'payload ' || g FROM generate_series(%s::bigint, %s::bigint) g",
                         (first, min(size, first + per_transaction) - 1))
            if first // RESTART_POINT_EVERY != (first + per_transaction) // RESTART_POINT_EVERY:
                conn.execute("CHECKPOINT")      # logs the running transactions: a restart point (see above)
        began = time.perf_counter()
        messages = conn.execute("SELECT count(*) FROM pg_logical_slot_peek_binary_changes('bench', NULL, NULL, "
                                "'proto_version', '1', 'publication_names', 'bench')").fetchone()[0]
        baseline = time.perf_counter() - began
    out = subprocess.run([sys.executable, __file__, "--drain", str(server.port), "--max-rows", str(max_rows)],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rows"] == size, result
    result.update(size=size, per_transaction=per_transaction, server_decode_s=round(baseline, 2),
                  server_messages=messages, ratio_to_server_decode=round(result["seconds"] / baseline, 2),
                  us_per_change=round(result["seconds"] / size * 1e6, 1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--transaction", type=int, default=1000)
    parser.add_argument("--huge", type=int, default=300000, help="rows of the one-transaction case (0: skip)")
    parser.add_argument("--max-rows", type=int, default=100000)
    parser.add_argument("--drain", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drain:
        print(json.dumps(drain(args.drain, args.max_rows)))
        return
    from seatide.testing.servers import PrivatePostgres

    server = PrivatePostgres().start()
    results = []
    try:
        cases = [(int(n), args.transaction) for n in args.sizes.split(",")]
        cases += [(args.huge, args.huge)] if args.huge else []
        for size, per_transaction in cases:
            result = measure(server, size, per_transaction, args.max_rows)
            results.append(result)
            print(f"{size:>10,} changes, {per_transaction:>7,} per transaction: drained in {result['seconds']:7.1f} s "
                  f"({result['us_per_change']:5.1f} us/change, {result['batches']} batches, last quarter "
                  f"{result['last_to_first']:.2f}x the first), "
                  f"{result['ratio_to_server_decode']:5.2f}x the server's own decode, "
                  f"peak RSS {result['peak_rss_mb']:.0f} MB", flush=True)
    finally:
        server.stop()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "cdc_backlog.json"), "w") as out:
        json.dump({"max_rows": args.max_rows, "results": results}, out, indent=2)


if __name__ == "__main__":
    main()
