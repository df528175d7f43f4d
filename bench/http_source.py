"""SeaTide's Http source vs a plain HTTP loop, alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/http_source.py [--pages 100] [--page-rows 1000] [--rounds 3]

A local HTTP server (a thread, ``seatide.testing.http_server``) serves ``--pages`` pages of
``--page-rows`` rows each ({"data": [{"id", "name", "value"}, ...]}, the page in ``?page=``), the
answers made once up front so both sides get the same bytes at the same cost. Both read every page
into a Spark DataFrame of (id bigint, name string, value double) and count it:

* plain: what a hand-written program does: a requests.Session, page after page, ``json.loads``,
  the rows as tuples into ``spark.createDataFrame``;
* seatide: the Http source (``content_field = "$.data.*"``, ``pageing``), its ``read`` as the
  runtime calls it: JSONPath on each page, each row as JSON text parsed by Spark's ``from_json``.

Prints every round with the load, the medians and the ratio. Writes bench/results/http_source.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from side_by_side import write_results  # noqa: E402

from seatide.config.loader import load_job_text  # noqa: E402
from seatide.plugin.base import ReadContext  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402
from seatide.testing.http_server import LocalHttp  # noqa: E402

SCHEMA = "schema = { fields { id = bigint, name = string, value = double } }"


def serve(server: LocalHttp, pages: int, page_rows: int) -> None:
    bodies = {}
    for page in range(1, pages + 2):
        rows = [] if page > pages else [{"id": i, "name": f"name-{i}", "value": i * 0.5}
                                        for i in range((page - 1) * page_rows, page * page_rows)]
        bodies[str(page)] = json.dumps({"data": rows}).encode("utf-8")
    server.route("/rows", lambda r: (200, bodies[r.query["page"]]))


def with_plain_loop(spark, url: str, page_rows: int) -> tuple[float, int]:
    import requests

    started = time.perf_counter()
    rows, page = [], 1
    with requests.Session() as session:
        while True:
            answer = session.get(url, params={"page": page}, timeout=(12, 60))
            answer.raise_for_status()
            data = json.loads(answer.text)["data"]
            rows += [(r["id"], r["name"], r["value"]) for r in data]
            if len(data) < page_rows:
                break
            page += 1
    count = spark.createDataFrame(rows, "id bigint, name string, value double").count()
    return time.perf_counter() - started, count


def with_seatide(spark, url: str, page_rows: int) -> tuple[float, int]:
    started = time.perf_counter()
    job = load_job_text(f'env {{ job.mode = BATCH }}\nsource {{ Http {{ url = "{url}", format = json, '
                        f'content_field = "$.data.*", pageing = {{ page_field = page, batch_size = {page_rows} }}, '
                        f'{SCHEMA} }} }}\nsink {{ Console {{}} }}')
    ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=1, max_rows_per_batch=1_000_000,
                      read_interval_ms=1, plugin_id="source[0]")
    count = job.sources[0].plugin.read(ctx).count()
    return time.perf_counter() - started, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--page-rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = build_session("bench-http", {"spark.master": "local[2]"})
    server = LocalHttp()
    try:
        serve(server, args.pages, args.page_rows)
        url, total = server.url("/rows"), args.pages * args.page_rows
        with_seatide(spark, url, args.page_rows)        # warm both paths (imports, Spark's plans)
        with_plain_loop(spark, url, args.page_rows)
        times = {"seatide": [], "plain": []}
        loads = []
        for round_no in range(1, args.rounds + 1):
            loads.append(os.getloadavg()[0])
            order = (("seatide", with_seatide), ("plain", with_plain_loop))
            for who, read in order if round_no % 2 else order[::-1]:
                took, count = read(spark, url, args.page_rows)
                assert count == total, f"{who} read {count} rows of {total}"
                times[who].append(took)
            print(f"{total:,} rows in {args.pages} pages, round {round_no}: seatide {times['seatide'][-1]:.2f} s, "
                  f"plain {times['plain'][-1]:.2f} s (load {loads[-1]:.1f})", flush=True)
        s, p = statistics.median(times["seatide"]), statistics.median(times["plain"])
        print(f"seatide median {s:.2f} s, plain loop median {p:.2f} s, ratio {s / p:.2f}x, "
              f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)
        path = write_results("http_source", {"command": "bench/http_source.py " + " ".join(sys.argv[1:]),
                                             "rows": total, "pages": args.pages, "seatide_s": times["seatide"],
                                             "plain_s": times["plain"], "ratio": s / p, "load_average": loads})
        print(f"wrote {path}")
    finally:
        server.stop()
        spark.stop()


if __name__ == "__main__":
    main()
