"""SeaTide's Paimon sink vs pypaimon's own writer used directly, alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/paimon.py [--rows 1000000] [--rounds 3]

Both write the same Spark DataFrame (id bigint, name string, value double; spark.range-based, two
partitions) into a table of their own in a fresh filesystem warehouse, as one batch:

* pypaimon: what a hand-written program does: ``df.toArrow()``, then pypaimon's batch writer
  (``write_arrow``, ``prepare_commit``) and one commit;
* seatide:  the Paimon sink through the one sink protocol (``runtime.sink_runs.sink_run``): the
  same collection and writer, the batch's commit messages decided (a local decision file, as
  ``sink_run`` keeps without a store), then one commit named by the batch.

Two cases: an append table, and a primary-key table (2 buckets) where SeaTide also takes the last
change per key (``changes``). Prints every round with the load, the medians and the ratio
(goal: seatide / pypaimon <= 1.2). Writes bench/results/paimon.json.
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

from seatide.connectors.paimon.sink import PaimonSink  # noqa: E402
from seatide.plugin.base import SinkContext  # noqa: E402
from seatide.plugin.options import read_options  # noqa: E402
from seatide.runtime.commit_log import SinkCommitLog  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402
from seatide.runtime.sink_runs import sink_run  # noqa: E402

GOAL = 1.2


def with_pypaimon(spark, warehouse: str, rows: int, keyed: bool) -> float:
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    started = time.perf_counter()
    data = frame(spark, rows).drop("__row_kind").toArrow()
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("bench", True)
    schema = pa.schema([f.with_nullable(not (keyed and f.name == "id")) for f in data.schema])
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"] if keyed else None, options={"bucket": "2"} if keyed else {}), False)
    table = catalog.get_table("bench.t")
    builder = table.new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(data.cast(schema))
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()
    return time.perf_counter() - started


def with_seatide(spark, warehouse: str, rows: int, keyed: bool) -> float:
    options = {"warehouse": warehouse, "database": "bench", "table": "t"}
    if keyed:
        options |= {"paimon.table.primary-keys": "id", "paimon.table.write-props": {"bucket": 2}}
    started = time.perf_counter()
    sink = PaimonSink(read_options(options, PaimonSink.options))
    ctx = SinkContext(spark, "bench", 1, "sink[0]", False, False, io.StringIO())
    run = sink_run(sink, ctx, SinkCommitLog(os.path.join(warehouse, "..", "log")), transaction_prefix="T_bench_1_0_L_")
    run.write(frame(spark, rows), 0)
    return time.perf_counter() - started


def count(warehouse: str) -> int:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table("bench.t")
    return table.snapshot_manager().get_latest_snapshot().total_record_count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = build_session("bench-paimon", {"spark.master": "local[2]"})
    with_seatide(spark, tempfile.mkdtemp() + "/wh", 1000, True)      # warm both paths (imports, Spark's plans)
    with_pypaimon(spark, tempfile.mkdtemp() + "/wh", 1000, True)
    cases = {}
    for case, keyed in (("append", False), ("primary key", True)):
        times = {"seatide": [], "pypaimon": []}
        loads = []
        for round_no in range(1, args.rounds + 1):
            loads.append(os.getloadavg()[0])
            order = (("seatide", with_seatide), ("pypaimon", with_pypaimon))
            for who, write in order if round_no % 2 else order[::-1]:
                warehouse = os.path.join(tempfile.mkdtemp(), "wh")
                times[who].append(write(spark, warehouse, args.rows, keyed))
                assert count(warehouse) == args.rows, f"{who} committed the wrong number of rows"
            print(f"{case}, {args.rows:,} rows, round {round_no}: seatide {times['seatide'][-1]:.2f} s, "
                  f"pypaimon {times['pypaimon'][-1]:.2f} s (load {loads[-1]:.1f})", flush=True)
        s, p = statistics.median(times["seatide"]), statistics.median(times["pypaimon"])
        print(f"{case}: seatide median {s:.2f} s, pypaimon median {p:.2f} s, ratio {s / p:.2f}x (goal <= {GOAL}x), "
              f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)
        cases[case] = {"rows": args.rows, "seatide_s": times["seatide"], "pypaimon_s": times["pypaimon"],
                       "ratio": s / p, "goal": GOAL, "load_average": loads}
    path = write_results("paimon", {"command": "bench/paimon.py " + " ".join(sys.argv[1:]), "cases": cases})
    print(f"wrote {path}")
    spark.stop()


if __name__ == "__main__":
    main()
