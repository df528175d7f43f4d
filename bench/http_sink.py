"""SeaTide's Http sink vs a plain requests loop, alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/http_sink.py [--rows 20000] [--rounds 3]

Both POST the same Spark DataFrame (id bigint, name string, value double; spark.range-based, two
partitions), one row a request, to the same local HTTP server (a thread of the bench,
``seatide.testing.http_server``, answering 200 to each), as one batch:

* plain: what a hand-written program does: each row as a JSON object (``to_json`` by Spark),
  ``toLocalIterator``, a requests.Session POSTing each with ``Content-Type: application/json``
  and an ``Idempotency-Key`` header;
* seatide: the Http sink through the one sink protocol (``runtime.sink_runs.sink_run``): the same
  rows and JSON, the same headers (the key is the batch's transaction id and the row's number),
  the batch's record in the commit log after.

After each side the receiver's requests are checked: every row once (the ids 0..rows-1), each
with its own Idempotency-Key. Prints every round with the load, the medians and the ratio.
Writes bench/results/http_sink.json.
"""

from __future__ import annotations

import argparse
import io
import json
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

from seatide.connectors.http.sink import IDEMPOTENCY_HEADER, HttpSink  # noqa: E402
from seatide.plugin.base import SinkContext  # noqa: E402
from seatide.plugin.options import read_options  # noqa: E402
from seatide.runtime.commit_log import SinkCommitLog  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402
from seatide.runtime.sink_runs import sink_run  # noqa: E402
from seatide.testing.http_server import LocalHttp  # noqa: E402

PATH = "/rows"


def with_plain_loop(spark, url: str, rows: int) -> float:
    import requests
    from pyspark.sql import functions as F

    started = time.perf_counter()
    df = frame(spark, rows).drop("__row_kind")
    shown = df.select(F.to_json(F.struct(*df.columns)).alias("v"))
    with requests.Session() as session:
        for n, row in enumerate(shown.toLocalIterator()):
            answer = session.post(url, data=row["v"].encode("utf-8"), timeout=(12, 60),
                                  headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: f"plain-{n}"})
            answer.raise_for_status()
    return time.perf_counter() - started


def with_seatide(spark, url: str, rows: int) -> float:
    started = time.perf_counter()
    sink = HttpSink(read_options({"url": url}, HttpSink.options))
    ctx = SinkContext(spark, "bench", 1, "sink[0]", False, False, io.StringIO())
    run = sink_run(sink, ctx, SinkCommitLog(tempfile.mkdtemp(prefix="bench-http-log-")),
                   transaction_prefix="T_bench_1_0_L_")
    run.write(frame(spark, rows), 0)
    run.end_of_data()
    return time.perf_counter() - started


def check_received(server: LocalHttp, who: str, rows: int) -> None:
    """Every row reached the receiver once, each with a key of its own."""
    sent = server.sent(PATH)
    ids = sorted(json.loads(r.body)["id"] for r in sent)
    keys = {r.headers.get(IDEMPOTENCY_HEADER.lower()) for r in sent}
    assert ids == list(range(rows)), f"{who}: the receiver got {len(ids)} rows, {len(set(ids))} distinct, of {rows}"
    assert len(keys) == rows and None not in keys, f"{who}: {len(keys)} distinct Idempotency-Keys for {rows} rows"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = build_session("bench-http-sink", {"spark.master": "local[2]"})
    server = LocalHttp()
    try:
        url = server.url(PATH)
        server.route(PATH, lambda _request: (200, b"{}"))
        with_seatide(spark, url, 1000)          # warm both paths (imports, Spark's plans)
        with_plain_loop(spark, url, 1000)
        times = {"seatide": [], "plain": []}
        loads = []
        for round_no in range(1, args.rounds + 1):
            loads.append(os.getloadavg()[0])
            order = (("seatide", with_seatide), ("plain", with_plain_loop))
            for who, write in order if round_no % 2 else order[::-1]:
                server.reset()
                server.route(PATH, lambda _request: (200, b"{}"))
                times[who].append(write(spark, url, args.rows))
                check_received(server, who, args.rows)
            print(f"{args.rows:,} rows, round {round_no}: seatide {times['seatide'][-1]:.2f} s, "
                  f"plain {times['plain'][-1]:.2f} s (load {loads[-1]:.1f})", flush=True)
        s, p = statistics.median(times["seatide"]), statistics.median(times["plain"])
        print(f"seatide median {s:.2f} s ({s / args.rows * 1e6:.0f} µs a row), plain loop median {p:.2f} s "
              f"({p / args.rows * 1e6:.0f} µs a row), ratio {s / p:.2f}x, load {min(loads):.1f}-{max(loads):.1f}",
              flush=True)
        path = write_results("http_sink", {"command": "bench/http_sink.py " + " ".join(sys.argv[1:]),
                                           "rows": args.rows, "seatide_s": times["seatide"],
                                           "plain_s": times["plain"], "ratio": s / p, "load_average": loads})
        print(f"wrote {path}")
    finally:
        server.stop()
        spark.stop()


if __name__ == "__main__":
    main()
