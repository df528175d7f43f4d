"""SeaTide's Redis sink vs redis-py's pipeline used directly, alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/redis_sink.py [--rows 200000] [--rounds 3]

Both write the same Spark DataFrame (id bigint, name string, value double; spark.range-based, two
partitions) into a private redis-server (Debian's), one key per row (data_type = key), as one batch:

* redis-py: what a hand-written program does: each row as a JSON object (``to_json`` by Spark),
  ``toLocalIterator``, SET in one transactional pipeline;
* seatide:  the Redis sink through the one sink protocol (``runtime.sink_runs.sink_run``): the same
  rows and JSON, the keys' record checked under WATCH, one MULTI/EXEC with the batch's record.

Prints every round with the load, the medians and the ratio (goal: seatide / redis-py <= 1.2).
Writes bench/results/redis.json.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from side_by_side import sample_rows as frame, write_results  # noqa: E402

from seatide.connectors.redis.sink import RedisSink  # noqa: E402
from seatide.plugin.base import SinkContext  # noqa: E402
from seatide.plugin.options import read_options  # noqa: E402
from seatide.runtime.commit_log import SinkCommitLog  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402
from seatide.runtime.sink_runs import sink_run  # noqa: E402
from seatide.testing.redis_server import PrivateRedis  # noqa: E402

GOAL = 1.2


def with_redis_py(spark, server: PrivateRedis, rows: int) -> float:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    df = frame(spark, rows).drop("__row_kind")
    shown = df.select(F.col("id").cast("string").alias("k"), F.to_json(F.struct(*df.columns)).alias("v"))
    client = server.client()
    with client.pipeline(transaction=True) as pipe:
        for row in shown.toLocalIterator():
            pipe.set(row["k"], row["v"])
        pipe.execute()
    client.close()
    return time.perf_counter() - started


def with_seatide(spark, server: PrivateRedis, rows: int) -> float:
    options = {"host": "127.0.0.1", "port": server.port, "key": "id", "data_type": "key"}
    started = time.perf_counter()
    sink = RedisSink(read_options(options, RedisSink.options))
    ctx = SinkContext(spark, "bench", 1, "sink[0]", False, False, io.StringIO())
    run = sink_run(sink, ctx, SinkCommitLog(tempfile.mkdtemp(prefix="bench-redis-log-")),
                   transaction_prefix="T_bench_1_0_L_")
    run.write(frame(spark, rows), 0)
    run.end_of_data()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = build_session("bench-redis", {"spark.master": "local[2]"})
    server = PrivateRedis(tempfile.mkdtemp(prefix="bench-redis-"))
    client = server.client()
    try:
        with_seatide(spark, server, 1000)       # warm both paths (imports, Spark's plans)
        with_redis_py(spark, server, 1000)
        times = {"seatide": [], "redis-py": []}
        loads = []
        for round_no in range(1, args.rounds + 1):
            loads.append(os.getloadavg()[0])
            order = (("seatide", with_seatide), ("redis-py", with_redis_py))
            for who, write in order if round_no % 2 else order[::-1]:
                client.flushall()
                times[who].append(write(spark, server, args.rows))
                written = sum(1 for _ in client.scan_iter(count=10_000)) - (1 if who == "seatide" else 0)
                assert written == args.rows, f"{who} wrote {written} keys"
            print(f"{args.rows:,} rows, round {round_no}: seatide {times['seatide'][-1]:.2f} s, "
                  f"redis-py {times['redis-py'][-1]:.2f} s (load {loads[-1]:.1f})", flush=True)
        s, r = statistics.median(times["seatide"]), statistics.median(times["redis-py"])
        print(f"seatide median {s:.2f} s, redis-py median {r:.2f} s, ratio {s / r:.2f}x (goal <= {GOAL}x), "
              f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)
        path = write_results("redis", {"command": "bench/redis_sink.py " + " ".join(sys.argv[1:]),
                                       "rows": args.rows, "seatide_s": times["seatide"],
                                       "redis_py_s": times["redis-py"], "ratio": s / r, "goal": GOAL,
                                       "load_average": loads})
        print(f"wrote {path}")
    finally:
        client.close()
        server.stop()
        spark.stop()


if __name__ == "__main__":
    main()
