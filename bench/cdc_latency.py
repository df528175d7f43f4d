"""CDC latency: a commit in the source database -> the row in the sink's hands.

    PYTHONPATH=src .venv/bin/python bench/cdc_latency.py --source postgres [--rate 1000] [--seconds 30]

Starts a private PostgreSQL (wal_level = logical), a Postgres-CDC source read the way a
STREAMING job reads it (micro-batches every checkpoint.interval, 1 s by default) and a
foreachBatch sink that collects each batch's rows on the driver. A writer commits
``rate`` inserts per second in transactions of 10 rows; each row's latency is the time
from its COMMIT returning to the batch holding it being collected. Prints count, p50,
p99 and max. The stream is warmed up (its first batch done) before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "connectors"))

from cdc_servers import PrivatePostgres  # noqa: E402

from seatide.config.loader import load_job_text  # noqa: E402
from seatide.plugin.base import ReadContext  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402

ROWS_PER_COMMIT = 10


def postgres_source(server: PrivatePostgres):
    with server.connect() as admin:
        admin.execute("CREATE DATABASE bench")
    conn = server.connect("bench")
    conn.execute("CREATE TABLE events (id bigint PRIMARY KEY, payload text)")
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/bench"
    job = load_job_text(f'env {{ job.mode = "STREAMING" }}\nsource {{ Postgres-CDC {{ base-url = "{url}", '
                        'username = postgres, password = "", table-names = ["bench.public.events"] } }\n'
                        "sink { Console {} }")
    return conn, job.sources[0].plugin


def write(conn, rate: int, seconds: float, committed: dict, stop: threading.Event) -> None:
    period = ROWS_PER_COMMIT / rate
    next_id, begin = 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - begin < seconds:
        ids = list(range(next_id, next_id + ROWS_PER_COMMIT))
        with conn.transaction():
            conn.cursor().executemany("INSERT INTO events VALUES (%s, 'x')", [(i,) for i in ids])
        now = time.time()
        for i in ids:
            committed[i] = now
        next_id += ROWS_PER_COMMIT
        delay = begin + (next_id / ROWS_PER_COMMIT) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", choices=["postgres"], default="postgres")
    parser.add_argument("--rate", type=int, default=1000, help="changes per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval-ms", type=int, default=1000, help="checkpoint.interval")
    args = parser.parse_args()

    server = PrivatePostgres().start()
    spark = build_session("cdc-latency", {"spark.master": "local[2]"})
    try:
        conn, source = postgres_source(server)
        writer_conn = server.connect("bench")
        writer_conn.autocommit = False
        seen: dict[int, float] = {}
        batches: list[int] = []

        def sink(df, batch_id):
            ids = [row.id for row in df.select("id").collect()]
            now = time.time()
            for i in ids:
                seen.setdefault(i, now)
            batches.append(batch_id)

        ctx = ReadContext(spark, micro_batch=True, unbounded=True, parallelism=1, max_rows_per_batch=100_000,
                          read_interval_ms=args.interval_ms, plugin_id="source[0]", job_id="bench", pipeline_id=0)
        checkpoint = tempfile.mkdtemp(prefix="seatide-cdc-bench-")
        query = (source.read(ctx).writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
                 .trigger(processingTime=f"{args.interval_ms} milliseconds").start())
        deadline = time.monotonic() + 120
        while not batches and time.monotonic() < deadline:
            time.sleep(0.1)
        committed: dict[int, float] = {}
        stop = threading.Event()
        writer = threading.Thread(target=write, args=(writer_conn, args.rate, args.seconds, committed, stop))
        writer.start()
        writer.join()
        deadline = time.monotonic() + 60
        while len([i for i in committed if i in seen]) < len(committed) and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()
        latencies = sorted(seen[i] - t for i, t in committed.items() if i in seen)
        missing = len(committed) - len(latencies)
        p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
        print(f"source=postgres rate={args.rate}/s seconds={args.seconds} interval={args.interval_ms}ms "
              f"rows={len(committed)} missing={missing} batches={len(batches)}")
        print(f"latency p50={p(0.50):.3f}s p99={p(0.99):.3f}s max={latencies[-1]:.3f}s "
              f"mean={statistics.mean(latencies):.3f}s")
        source.release("bench")
    finally:
        spark.stop()
        server.stop()


if __name__ == "__main__":
    main()
