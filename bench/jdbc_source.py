"""Jdbc source vs Spark's plain ``spark.read.jdbc`` on one PostgreSQL table, same process.

    .venv/bin/python bench/jdbc_source.py [--rows 1000000] [--rounds 3] [--max-rows 1000000]

Table: id bigint primary key, name text, amount numeric(12,2), at timestamp. Each round
reads it into Spark's no-op sink (every row and column is materialised, nothing is
written), in one SparkSession, the order reversed every other round:

* plain: ``spark.read.jdbc`` partitioned by id into as many ranges as Spark has cores;
* ``parallel``: Jdbc source, plain BATCH (Spark's JDBC reader under SeaTunnel's options, defaults);
* ``routed``: Jdbc source, checkpointed, as a job runs it since the source expands its batches
  (runtime/table_routing.py): a stream of split descriptors (micro-batches of ``--max-rows``,
  available-now trigger), each batch's splits derived from its logged offsets and read by
  Spark's JDBC reader, bounded by their ranges (``batch_rows``), in the batch's ``foreachBatch``;
* ``checkpointed``: the Python reader (split by split with psycopg in Python workers), which a
  pipeline with a row-merging Sql query still uses.

Prints every round, the medians and throughput ratios source / plain (goal >= 0.9x for
the plain-BATCH path), both as the ratio of medians and as the median of per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import tempfile
import time

from seatide.config.loader import load_job_text
from seatide.connectors.jdbc.url import JdbcUrl
from seatide.plugin.base import ReadContext
from seatide.runtime.offset_log import batch_offsets
from seatide.runtime.session import build_session

URL = "jdbc:postgresql://127.0.0.1:5432/test"


def create_table(name: str, rows: int) -> None:
    with JdbcUrl.parse(URL).connect("postgres", autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text, amount numeric(12,2), at timestamp)")
        conn.execute(f"INSERT INTO {name} SELECT g, 'name-' || g, g / 100.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' "
                     f"FROM generate_series(1, {rows}) g")
        conn.execute(f"ANALYZE {name}")


def drop_table(name: str) -> None:
    with JdbcUrl.parse(URL).connect("postgres", autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=1_000_000)
    parser.add_argument("--paths", default="parallel,routed,checkpointed", help="which Jdbc source paths to time")
    args = parser.parse_args()
    spark = build_session("bench-jdbc-source", {"spark.master": "local[2]"})
    cores = spark.sparkContext.defaultParallelism
    name = f"jdbc_bench_{secrets.token_hex(4)}"
    create_table(name, args.rows)
    try:
        source = load_job_text(f'env {{ parallelism = {cores} }}\nsource {{ Jdbc {{ url = "{URL}", '
                               f'driver = "org.postgresql.Driver", user = postgres, table_path = "{name}" }} }}\n'
                               "sink { Console {} }").sources[0].plugin

        def plain():
            spark.read.jdbc(URL, name, column="id", lowerBound=1, upperBound=args.rows + 1, numPartitions=cores,
                            properties={"user": "postgres", "driver": "org.postgresql.Driver"}) \
                .write.format("noop").mode("overwrite").save()

        def parallel():
            ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=cores,
                              max_rows_per_batch=args.max_rows, read_interval_ms=1000, plugin_id="source[0]")
            source.read(ctx).write.format("noop").mode("overwrite").save()

        def checkpointed():
            ctx = ReadContext(spark, micro_batch=True, unbounded=False, parallelism=cores,
                              max_rows_per_batch=args.max_rows, read_interval_ms=1000, plugin_id="source[0]")
            with tempfile.TemporaryDirectory() as checkpoint:
                query = (source.read(ctx).writeStream.format("noop").trigger(availableNow=True)
                         .option("checkpointLocation", checkpoint).start())
                query.awaitTermination()

        def routed():
            ctx = ReadContext(spark, micro_batch=True, unbounded=False, parallelism=cores,
                              max_rows_per_batch=args.max_rows, read_interval_ms=1000, plugin_id="source[0]",
                              expand_batches=True)

            with tempfile.TemporaryDirectory() as checkpoint:
                def each(descriptors, batch_id):
                    # the batch's splits from the offsets Spark logged for it, as pipeline_run does
                    offsets = batch_offsets(checkpoint, batch_id)
                    for frame in source.batch_rows(descriptors, ctx, offsets).per_table.values():   # the one table
                        frame.write.format("noop").mode("overwrite").save()

                query = (source.read(ctx).writeStream.foreachBatch(each).trigger(availableNow=True)
                         .option("checkpointLocation", checkpoint).start())
                query.awaitTermination()

        ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=cores,
                          max_rows_per_batch=args.max_rows, read_interval_ms=1000, plugin_id="source[0]")
        assert source.read(ctx).count() == args.rows, "the Jdbc source read the wrong number of rows"
        plain()                                      # warm up the JVM and the JDBC driver once
        runs = {"plain": plain, "parallel": parallel, "routed": routed, "checkpointed": checkpointed}
        times: dict[str, list[float]] = {k: [] for k in ["plain", *args.paths.split(",")]}
        for round_no in range(1, args.rounds + 1):
            order = list(times) if round_no % 2 else list(reversed(times))   # neither always goes first
            for label in order:
                times[label].append(timed(runs[label]))
            print(f"round {round_no}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
        medians = {k: statistics.median(v) for k, v in times.items()}
        print(f"{args.rows:,} rows: plain spark.read.jdbc {medians['plain']:.2f} s "
              f"({args.rows / medians['plain']:,.0f} rows/s); load {os.getloadavg()[0]:.1f} on {cores} cores")
        for label in list(times)[1:]:
            # Rounds are paired (same moment, same machine load), so the median of the per-round
            # ratios is steadier than the ratio of medians on a shared machine; both are printed.
            paired = statistics.median(p / s for p, s in zip(times["plain"], times[label]))
            print(f"  Jdbc source, {label}: {medians[label]:.2f} s ({args.rows / medians[label]:,.0f} rows/s), "
                  f"throughput ratio {medians['plain'] / medians[label]:.2f}x of plain (median of per-round "
                  f"ratios {paired:.2f}x)" + (" (goal >= 0.9x)" if label == "parallel" else "")
                  + (" (goal >= 0.8x)" if label == "routed" else ""))
        results = os.path.join(os.environ.get("SEATIDE_BENCH_RESULTS")
                               or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"), "jdbc_source.json")
        with open(results, "w") as handle:
            json.dump({"rows": args.rows, "max_rows_per_batch": args.max_rows, "cores": cores, "rounds": times,
                       "median_s": medians, "load_average": os.getloadavg(),
                       "throughput_ratio_vs_plain": {k: medians["plain"] / medians[k] for k in list(times)[1:]},
                       "median_paired_ratio": {k: statistics.median(p / s for p, s in zip(times["plain"], times[k]))
                                               for k in list(times)[1:]}}, handle, indent=2)
        print(f"wrote {results}")
    finally:
        drop_table(name)
        spark.stop()


if __name__ == "__main__":
    main()
