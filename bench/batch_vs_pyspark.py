"""SeaTide vs a hand-written PySpark program: the same BATCH job, alternating, in one run.

    .venv/bin/python bench/batch_vs_pyspark.py [--rows 10000000] [--rounds 3]

Job: FakeSource (id bigint, name string, value double) -> LocalFile parquet (snappy, Spark's
default, so both write the same files). Each round
runs `seatide run` (a fresh process: CLI, embedded coordinator and worker, driver, Spark)
and then the hand-written program (a fresh process: Spark); wall time of each command.
Prints every round, the medians and the ratio SeaTide / hand-written (target <= 1.15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEATIDE = os.path.join(ROOT, ".venv", "bin", "seatide")

JOB = """
env {{ job.name = "bench", job.mode = BATCH, parallelism = 2 }}
source {{
  FakeSource {{
    row.num = {per_reader}
    split.num = 1
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string, value = double }} }}
  }}
}}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet", compress_codec = "snappy" }} }}
"""


def count_rows(path: str) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        total += sum(pq.ParquetFile(os.path.join(root, f)).metadata.num_rows
                     for f in files if f.endswith(".parquet"))
    return total


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    seatide_times, hand_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(1, args.rounds + 1):
            out = os.path.join(tmp, f"seatide-{round_no}")
            conf = os.path.join(tmp, f"job-{round_no}.conf")
            with open(conf, "w") as handle:
                handle.write(JOB.format(per_reader=args.rows // 2, out=out))
            seatide_times.append(timed([SEATIDE, "run", conf, "--data-dir", os.path.join(tmp, f"data-{round_no}")]))
            assert count_rows(out) == args.rows, "SeaTide wrote the wrong number of rows"
            hand_out = os.path.join(tmp, f"hand-{round_no}")
            hand_times.append(timed([sys.executable, os.path.join(HERE, "handwritten_fake_to_parquet.py"),
                                     hand_out, str(args.rows)]))
            assert count_rows(hand_out) == args.rows
            print(f"round {round_no}: seatide {seatide_times[-1]:.1f} s, hand-written {hand_times[-1]:.1f} s",
                  flush=True)
    s, h = statistics.median(seatide_times), statistics.median(hand_times)
    print(f"{args.rows:,} rows -> parquet: seatide median {s:.1f} s, hand-written median {h:.1f} s, "
          f"ratio {s / h:.2f}x (target <= 1.15x)")


if __name__ == "__main__":
    main()
