"""SeaTide vs a hand-written PySpark program: the same BATCH job, alternating, in one run.

    .venv/bin/python bench/batch_vs_pyspark.py [--rows 1000000,10000000] [--modes plain,checkpointed]
                                               [--rounds 3]

Job: FakeSource (id bigint, name string, value double) -> LocalFile parquet (snappy, Spark's
default, so both write the same files). Each case (rows x mode) runs its rounds alternating:
`seatide run` (a fresh process: CLI, embedded coordinator and worker, driver, Spark), then
the hand-written program (a fresh process: Spark); wall time of each command.

Modes: ``plain`` (one Spark job; hand-written: ``spark.range(...).write.parquet``) and
``checkpointed`` (``checkpoint.interval`` set: resumable micro-batches of
``micro-batch.max-rows``; hand-written: Structured Streaming ``availableNow`` with a
``checkpointLocation``, the same rows per micro-batch, Spark's parquet file sink).
Prints every round, the medians and ratios SeaTide / hand-written (goals <= 1.15x plain,
<= 1.3x checkpointed); writes bench/results/batch_vs_pyspark.json and .png.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

from side_by_side import draw_pairs, median, pyplot, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEATIDE = os.path.join(ROOT, ".venv", "bin", "seatide")
GOALS = {"plain": 1.15, "checkpointed": 1.3}
MAX_ROWS_PER_BATCH = 1_000_000   # SeaTide's micro-batch.max-rows default; the baseline's too

JOB = """
env {{ job.name = "bench", job.mode = BATCH, parallelism = 2 {checkpointing} }}
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
CHECKPOINTING = f', checkpoint.interval = 1000, micro-batch.max-rows = {MAX_ROWS_PER_BATCH}'


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


def seatide_command(tmp: str, name: str, rows: int, mode: str) -> tuple[list[str], str]:
    out, conf = os.path.join(tmp, f"seatide-{name}"), os.path.join(tmp, f"job-{name}.conf")
    with open(conf, "w") as handle:
        handle.write(JOB.format(per_reader=rows // 2, out=out,
                                checkpointing=CHECKPOINTING if mode == "checkpointed" else ""))
    return [SEATIDE, "run", conf, "--data-dir", os.path.join(tmp, f"data-{name}")], out


def hand_command(tmp: str, name: str, rows: int, mode: str) -> tuple[list[str], str]:
    out = os.path.join(tmp, f"hand-{name}")
    command = [sys.executable, os.path.join(HERE, "handwritten_fake_to_parquet.py"), out, str(rows)]
    if mode == "checkpointed":
        command += ["--checkpointed", os.path.join(tmp, f"hand-checkpoint-{name}"),
                    "--max-rows", str(MAX_ROWS_PER_BATCH)]
    return command, out


def run_case(tmp: str, rows: int, mode: str, rounds: int) -> dict:
    times: dict[str, list[float]] = {"seatide": [], "hand": []}
    loads = []
    for round_no in range(1, rounds + 1):
        loads.append(os.getloadavg()[0])
        for who, make in (("seatide", seatide_command), ("hand", hand_command)):
            command, out = make(tmp, f"{rows}-{mode}-{round_no}", rows, mode)
            times[who].append(timed(command))
            assert count_rows(out) == rows, f"{who} wrote the wrong number of rows"
        print(f"{rows:,} rows {mode}, round {round_no}: seatide {times['seatide'][-1]:.1f} s, "
              f"hand-written {times['hand'][-1]:.1f} s (load {loads[-1]:.1f})", flush=True)
    s, h = median(times["seatide"]), median(times["hand"])
    print(f"{rows:,} rows {mode}: seatide median {s:.1f} s, hand-written median {h:.1f} s, "
          f"ratio {s / h:.2f}x (goal <= {GOALS[mode]}x)", flush=True)
    return {"rows": rows, "mode": mode, "seatide_s": times["seatide"], "hand_s": times["hand"],
            "seatide_median_s": s, "hand_median_s": h, "ratio": s / h, "goal": GOALS[mode],
            "load_average": loads}


def plot(cases: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    draw_pairs(ax, [f"{c['rows'] / 1e6:g}M rows\n{c['mode']}" for c in cases],
               [c["seatide_median_s"] for c in cases], [c["hand_median_s"] for c in cases],
               "wall time, median (s)", [c["goal"] for c in cases])
    ax.set_title("BATCH FakeSource -> parquet: `seatide run` vs hand-written PySpark", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="1000000,10000000", help="comma-separated row counts")
    parser.add_argument("--modes", default="plain,checkpointed", help="plain, checkpointed or both")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            for mode in args.modes.split(","):
                cases.append(run_case(tmp, rows, mode, args.rounds))
    command = "bench/batch_vs_pyspark.py " + " ".join(sys.argv[1:])
    path = write_results("batch_vs_pyspark", {"command": command, "cases": cases})
    png = path.removesuffix(".json") + ".png"
    print(f"wrote {path}" + (f" and {png}" if plot(cases, png) else " (no plot: pip install -e .[bench])"))


if __name__ == "__main__":
    main()
