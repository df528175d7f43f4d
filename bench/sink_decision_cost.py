"""The cost of the sink commit decision: one checkpointed BATCH job, this tree vs a baseline tree.

    .venv/bin/python bench/sink_decision_cost.py --baseline-src /path/to/older/src [--rows 1000000]
        [--rows-per-batch 100000] [--rounds 2]

Job: FakeSource (id bigint, name string, value double) -> LocalFile parquet, checkpointed in
micro-batches of ``--rows-per-batch`` rows, so every batch pays the decision (one fenced store
write) and the published mark (one more). Each round runs ``seatide run`` (a fresh process)
with this tree's ``src`` and then with the baseline's, alternating; prints every round, the
medians and the ratio this tree / baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")

from batch_vs_pyspark import count_rows  # noqa: E402  (the same reader of parquet row counts)

JOB = """
env {{ job.name = "bench", job.mode = BATCH, parallelism = 2, checkpoint.interval = 1000,
      micro-batch.max-rows = {per_batch} }}
source {{
  FakeSource {{
    row.num = {per_reader}
    split.num = 4
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string, value = double }} }}
  }}
}}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet", compress_codec = "snappy" }} }}
"""


def timed_run(src: str, conf: str, data_dir: str) -> float:
    env = {**os.environ, "PYTHONPATH": src}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", conf, "--data-dir", data_dir],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-src", required=True, help="the src directory of the tree to compare with")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rows-per-batch", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"this": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="seatide-bench-") as tmp:
        for round_no in range(1, args.rounds + 1):
            for name, src in (("this", SRC), ("baseline", args.baseline_src)):
                out = os.path.join(tmp, f"{name}-{round_no}")
                conf = os.path.join(tmp, f"{name}-{round_no}.conf")
                with open(conf, "w") as handle:
                    handle.write(JOB.format(per_reader=args.rows // 2, per_batch=args.rows_per_batch, out=out))
                times[name].append(timed_run(src, conf, os.path.join(tmp, f"data-{name}-{round_no}")))
                assert count_rows(out) == args.rows, f"{name} wrote the wrong number of rows"
            print(f"round {round_no}: this {times['this'][-1]:.1f} s, baseline {times['baseline'][-1]:.1f} s",
                  flush=True)
    this, base = statistics.median(times["this"]), statistics.median(times["baseline"])
    print(f"{args.rows:,} rows in batches of {args.rows_per_batch:,} -> parquet: this median {this:.1f} s, "
          f"baseline median {base:.1f} s, ratio {this / base:.2f}x")


if __name__ == "__main__":
    main()
