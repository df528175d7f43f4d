"""SeaTide's Iceberg sink vs a hand-written PySpark + pyiceberg program: the same BATCH job, alternating.

    .venv/bin/python bench/iceberg_write.py [--rows 10000000] [--rounds 3]

Job: FakeSource (id bigint, name string, value double) -> an Iceberg table in a JDBC (SQL)
catalog on SQLite, zstd parquet. `seatide run` (a fresh process: CLI, embedded coordinator and
worker, driver, Spark; the sink writes with Spark's executors and commits one snapshot carrying
the batch's transaction id) alternates with bench/handwritten_iceberg.py (a fresh process:
Spark writes parquet, pyiceberg's add_files commits it). Wall time of each command; rows are
counted from the committed snapshot's summary. Goal: SeaTide / hand-written <= 1.2x.
Writes bench/results/iceberg_write.json and .png.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from side_by_side import draw_pairs, median, pyplot, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEATIDE = os.path.join(ROOT, ".venv", "bin", "seatide")
GOAL = 1.2

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
sink {{ Iceberg {{ namespace = bench, table = t,
  iceberg.catalog.config = {{ type = jdbc, uri = "jdbc:sqlite:{catalog}", warehouse = "file://{warehouse}" }} }} }}
"""


def committed_rows(catalog: str, warehouse: str) -> int:
    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog("default", uri=f"sqlite:///{catalog}", warehouse=f"file://{warehouse}").load_table("bench.t")
    return int(table.metadata.current_snapshot().summary.additional_properties["total-records"])


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def run(tmp: str, rows: int, rounds: int) -> dict:
    times: dict[str, list[float]] = {"seatide": [], "hand": []}
    loads = []
    for round_no in range(1, rounds + 1):
        loads.append(os.getloadavg()[0])
        for who in ("seatide", "hand"):
            base = os.path.join(tmp, f"{who}-{round_no}")
            os.makedirs(base)
            catalog, warehouse = os.path.join(base, "catalog.db"), os.path.join(base, "warehouse")
            if who == "seatide":
                conf = os.path.join(base, "job.conf")
                with open(conf, "w") as handle:
                    handle.write(JOB.format(per_reader=rows // 2, catalog=catalog, warehouse=warehouse))
                command = [SEATIDE, "run", conf, "--data-dir", os.path.join(base, "data")]
            else:
                command = [sys.executable, os.path.join(HERE, "handwritten_iceberg.py"), catalog, warehouse, str(rows)]
            times[who].append(timed(command))
            assert committed_rows(catalog, warehouse) == rows, f"{who} committed the wrong number of rows"
        print(f"{rows:,} rows, round {round_no}: seatide {times['seatide'][-1]:.1f} s, "
              f"hand-written {times['hand'][-1]:.1f} s (load {loads[-1]:.1f})", flush=True)
    s, h = median(times["seatide"]), median(times["hand"])
    print(f"{rows:,} rows: seatide median {s:.1f} s, hand-written median {h:.1f} s, ratio {s / h:.2f}x "
          f"(goal <= {GOAL}x)", flush=True)
    return {"rows": rows, "seatide_s": times["seatide"], "hand_s": times["hand"], "seatide_median_s": s,
            "hand_median_s": h, "ratio": s / h, "goal": GOAL, "load_average": loads}


def plot(case: dict, path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(5, 4))
    draw_pairs(ax, [f"{case['rows'] / 1e6:g}M rows"], [case["seatide_median_s"]], [case["hand_median_s"]],
               "wall time, median (s)", [case["goal"]])
    ax.set_title("FakeSource -> Iceberg: `seatide run` vs PySpark + pyiceberg", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        case = run(tmp, args.rows, args.rounds)
    path = write_results("iceberg_write", {"command": "bench/iceberg_write.py " + " ".join(sys.argv[1:]),
                                           "case": case})
    png = path.removesuffix(".json") + ".png"
    print(f"wrote {path}" + (f" and {png}" if plot(case, png) else " (no plot: pip install -e .[bench])"))


if __name__ == "__main__":
    main()
