"""A 10M-row BATCH job submitted to a worker with a warm driver vs a hand-written PySpark
program started cold, alternating, in one run.

    .venv/bin/python bench/warm_submit_batch.py [--rows 10000000] [--rounds 3] [--out bench/results/warm_submit_batch]

The job is ``bench/batch_vs_pyspark.py``'s (FakeSource id, name, value -> LocalFile parquet).
SeaTide: one coordinator and one worker (``--warm-drivers 1``, SQLite store) started once;
each round waits until the worker's warm driver is ready, then times ``POST submit-job`` ->
the job FINISHED in the store. Hand-written: ``bench/handwritten_fake_to_parquet.py`` in a
fresh process, timed to its exit (it pays Python, the JVM and a SparkSession, which the
warm driver paid before the submit). The issue's goal: SeaTide / hand-written <= 1.0.
Writes ``<out>.json`` and, with matplotlib, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.batch_vs_pyspark import HERE, JOB, count_rows, timed  # noqa: E402
from seatide.testing.cluster import Cluster, wait_for  # noqa: E402
from tests.cluster.warm import ready_warm_pid  # noqa: E402


def submitted_run(cluster: Cluster, worker, tmp: str, round_no: int, rows: int) -> float:
    ready_warm_pid(worker, timeout=600)
    out = os.path.join(tmp, f"seatide-{round_no}")
    job_id = f"warm-batch-{round_no}"
    started = time.perf_counter()
    cluster.submit(JOB.format(per_reader=rows // 2, out=out, checkpointing=""), job_id)
    wait_for(lambda: cluster.job(job_id).status in ("FINISHED", "FAILED", "CANCELED"), 1800, interval=0.05,
             message=f"{job_id} to end")
    seconds = time.perf_counter() - started
    assert cluster.job(job_id).status == "FINISHED", cluster.job(job_id)
    assert count_rows(out) == rows, "SeaTide wrote the wrong number of rows"
    return seconds


def plot(result: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    sides = [("seatide submit\n(warm driver)", result["seatide_s"], "#2a7ab9"),
             ("hand-written PySpark\n(started cold)", result["handwritten_s"], "#b0b0b0")]
    for i, (label, samples, color) in enumerate(sides):
        ax.bar(i, statistics.median(samples), 0.6, color=color)
        ax.scatter([i] * len(samples), samples, s=12, color="black", zorder=3)
    ax.set_xticks(range(len(sides)), [s[0] for s in sides])
    ax.set_ylabel("seconds, submit -> FINISHED / start -> exit")
    ax.set_title(f"{result['rows']:,} rows -> parquet: {result['ratio']:.2f}x (median, dots: rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(os.environ.get("SEATIDE_BENCH_RESULTS")
                                                      or os.path.join(HERE, "results"), "warm_submit_batch"))
    args = parser.parse_args()
    result = {"rows": args.rows, "seatide_s": [], "handwritten_s": [], "load_1min": []}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(f"sqlite:///{tmp}/store.db", f"{tmp}/data", warm_drivers=1, plan_warm_up=True)
        try:
            cluster.coordinator("c1")
            worker = cluster.worker("w1", slots=1)
            for round_no in range(1, args.rounds + 1):
                result["load_1min"].append(round(os.getloadavg()[0], 1))
                hand_out = os.path.join(tmp, f"hand-{round_no}")

                def seatide():
                    result["seatide_s"].append(round(submitted_run(cluster, worker, tmp, round_no, args.rows), 2))

                def hand():
                    # the worker starts its next warm driver as soon as the last one took a job: its
                    # JVM start (12-14 CPU-s) must not fall inside the hand-written program's window
                    ready_warm_pid(worker, timeout=600)
                    result["handwritten_s"].append(round(timed([sys.executable, os.path.join(
                        HERE, "handwritten_fake_to_parquet.py"), hand_out, str(args.rows)]), 2))
                # the sides alternate which goes first: neither always meets the machine's later load
                for side in ((seatide, hand) if round_no % 2 else (hand, seatide)):
                    side()
                assert count_rows(hand_out) == args.rows
                print(f"round {round_no}: seatide submit {result['seatide_s'][-1]:.1f} s, "
                      f"hand-written {result['handwritten_s'][-1]:.1f} s (load {result['load_1min'][-1]:.1f})",
                      flush=True)
        finally:
            cluster.stop_all()
    result["ratio"] = round(statistics.median(result["seatide_s"]) / statistics.median(result["handwritten_s"]), 3)
    with open(args.out + ".json", "w") as handle:
        json.dump(result, handle, indent=2)
    print(f"{args.rows:,} rows -> parquet: seatide submit (warm) median {statistics.median(result['seatide_s']):.1f} s, "
          f"hand-written (cold) median {statistics.median(result['handwritten_s']):.1f} s, ratio {result['ratio']:.2f}x "
          f"(goal <= 0.3x); load {statistics.median(result['load_1min']):.1f} on {os.cpu_count()} cores")
    print(f"wrote {args.out}.json" + (f" and {args.out}.png" if plot(result, args.out + ".png") else ""))


if __name__ == "__main__":
    main()
