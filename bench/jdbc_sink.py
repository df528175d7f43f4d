"""Exactly-once Jdbc sink vs Spark's plain JDBC append, into PostgreSQL, alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/jdbc_sink.py [--rows 1000000] [--rounds 3]

Both write the same DataFrame (id bigint, name string, value double; spark.range-based,
two partitions) into a table of their own in a fresh database:

* plain:   ``df.write.jdbc(url, table, mode="append")`` — rows are visible partition by
           partition, a retry after a failure writes them again;
* seatide: the Jdbc sink's targets through the runtime's ``write_exactly_once`` — staged by
           the executors, then applied with its commit record in one transaction.

Prints every round, the medians, and seatide's throughput as a fraction of plain append's
(goal: >= 0.8). The sink stages with the driver's multi-row INSERT rewriting
(reWriteBatchedInserts), which most of its lead comes from; ``--plain-rewrite`` gives plain
append the same setting, for the cost of exactly-once alone.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import secrets
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from seatide.connectors.jdbc.sink import JdbcSink  # noqa: E402
from seatide.connectors.jdbc.url import JdbcUrl  # noqa: E402
from seatide.plugin.base import SinkContext  # noqa: E402
from seatide.plugin.options import read_options  # noqa: E402
from seatide.plugin.sink_protocol import open_sink  # noqa: E402
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402

SERVER = "jdbc:postgresql://127.0.0.1:5432/{db}"


def count(url: str, table: str) -> int:
    conn = JdbcUrl.parse(url).connect("postgres", autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        return cursor.fetchone()[0]
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plain-rewrite", action="store_true",
                        help="give plain append reWriteBatchedInserts=true too (the sink's staging uses it)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("seatide.connectors.jdbc.targets").setLevel(logging.INFO)   # stage / commit split

    name = f"jdbc_sink_bench_{secrets.token_hex(4)}"
    admin = JdbcUrl.parse(SERVER.format(db="test")).connect("postgres", autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE {name}")
    url = SERVER.format(db=name)
    spark = build_session("jdbc-sink-bench", {"spark.master": "local[2]"})
    try:
        df = spark.range(0, args.rows, 1, 2).selectExpr(
            "id", "concat('name-', id) AS name", "CAST(id AS DOUBLE) / 7 AS value")
        sink = JdbcSink(read_options({"url": url, "user": "postgres", "table": "eo"}, JdbcSink.options))
        ctx = SinkContext(spark=spark, job_id="bench", pipeline_id=1, plugin_id="sink[0]", micro_batch=False,
                          unbounded=False, stdout=io.StringIO())
        writer = open_sink(sink, ctx)
        log_dir = tempfile.mkdtemp(prefix="jdbc-sink-bench-")
        log = SinkCommitLog(log_dir)
        props = {"user": "postgres", "password": "", "driver": "org.postgresql.Driver"}
        plain_times, eo_times = [], []
        for round_no in range(args.rounds):
            started = time.perf_counter()
            plain_url = url + ("?reWriteBatchedInserts=true" if args.plain_rewrite else "")
            df.write.jdbc(plain_url, "plain", mode="append", properties=props)
            plain_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = write_exactly_once(writer, log, df, round_no, f"T_bench_1_0_L_{round_no}")
            eo_times.append(time.perf_counter() - started)
            assert result.state["rows"] == args.rows
            print(f"round {round_no + 1}: plain append {plain_times[-1]:.2f} s, "
                  f"exactly-once sink {eo_times[-1]:.2f} s", flush=True)
        expected = args.rows * args.rounds
        assert count(url, "plain") == expected and count(url, "eo") == expected, "row counts differ"
        plain, eo = statistics.median(plain_times), statistics.median(eo_times)
        print(f"median: plain append {plain:.2f} s ({args.rows / plain:,.0f} rows/s), "
              f"exactly-once sink {eo:.2f} s ({args.rows / eo:,.0f} rows/s)")
        print(f"exactly-once throughput / plain append throughput = {plain / eo:.2f}x")
    finally:
        spark.stop()
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


if __name__ == "__main__":
    main()
