"""The Python processes Spark starts for a job, from SeaTide's Spark home vs PySpark's own.

    .venv/bin/python bench/python_workers.py [--rounds 4] [--out bench/results/python_workers]

Each sample is one ``seatide run`` of a small checkpointed BATCH job (FakeSource -> JSON
files, 4 micro-batches: a Python data source, planned and read through Spark's Python
workers and a streaming source runner). The samples alternate SeaTide's Spark home (the
default, ``seatide/runtime/spark_home.py``) and ``SPARK_HOME`` set to PySpark's own
directory, whose ``python/lib/pyspark.zip`` Spark puts first on every worker's path. While a
sample runs, /proc is read every 50 ms; the CPU of every Python process Spark started
(daemons, their forked workers, the streaming source runner) is summed at its last
reading, and the run's wall time is kept. Writes ``<out>.json`` and, with matplotlib,
``<out>.png``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from seatide.runtime import spark_home  # noqa: E402
from seatide.testing.jobs import batch_job, written_ids  # noqa: E402
from bench.side_by_side import alternate, draw_alternating, median_of, write_json  # noqa: E402

SEATIDE = [sys.executable, "-m", "seatide.cli.main"]
TICK = os.sysconf("SC_CLK_TCK")
# what Spark starts in Python: planner and worker daemons (and their forks), source runners
SPARK_PYTHON = (b"pyspark.daemon", b"python_streaming_source_runner")


def _stat(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        fields = _stat(pid)
        if fields is None:
            return False
        pid = int(fields[1])
    return False


def _spark_python_cpu(seen: dict[int, float], run_pid: int) -> None:
    """CPU so far of each Spark-started Python process under ``run_pid`` (a shared machine
    runs other jobs' workers too)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if not any(marker in handle.read() for marker in SPARK_PYTHON):
                    continue
        except OSError:
            continue
        fields = _stat(entry)
        if fields is not None and (int(entry) in seen or _descends_from(int(entry), run_pid)):
            seen[int(entry)] = (int(fields[11]) + int(fields[12])) / TICK


def sample(own_home: bool, tmp: str, index: int) -> dict:
    out = os.path.join(tmp, f"out{index}")
    conf = os.path.join(tmp, f"job{index}.conf")
    with open(conf, "w") as handle:
        handle.write(batch_job(out, rows=400, rows_per_batch=100))
    env = dict(os.environ)
    env.pop("SPARK_HOME", None)
    if not own_home:
        env["SPARK_HOME"] = spark_home.pyspark_home()
    seen: dict[int, float] = {}
    started = time.perf_counter()
    run = subprocess.Popen([*SEATIDE, "run", conf, "--data-dir", os.path.join(tmp, f"d{index}")],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while run.poll() is None:
        _spark_python_cpu(seen, run.pid)
        time.sleep(0.05)
    wall = time.perf_counter() - started
    if run.returncode != 0 or len(written_ids(out + "/p0")) != 400:
        raise SystemExit(f"a sample failed (exit {run.returncode}):\n{run.stderr.read()[-3000:]}")
    return {"wall_s": round(wall, 2), "python_cpu_s": round(sum(seen.values()), 2), "processes": len(seen)}


def plot(result: dict, path: str) -> bool:
    return draw_alternating(path, {"SeaTide's Spark home": result["seatide_home"],
                                   "PySpark's (zip first)": result["pyspark_home"]},
                            [("python_cpu_s", "CPU of Spark's Python processes (s)"), ("wall_s", "seatide run, wall (s)")],
                            f"4-batch checkpointed job: Python CPU {result['cpu_ratio']:.2f}x, "
                            f"wall {result['wall_ratio']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "python_workers"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        count = iter(range(10 ** 6))
        samples = alternate(args.rounds, {"seatide home": lambda: sample(True, tmp, next(count)),
                                          "pyspark home": lambda: sample(False, tmp, next(count))})
    ours, theirs = samples["seatide home"], samples["pyspark home"]
    result = {"seatide_home": ours, "pyspark_home": theirs, "load_avg": os.getloadavg(),
              "cpu_ratio": median_of(ours, "python_cpu_s") / median_of(theirs, "python_cpu_s"),
              "wall_ratio": median_of(ours, "wall_s") / median_of(theirs, "wall_s")}
    write_json(args.out + ".json", result)
    plotted = plot(result, args.out + ".png")
    print(f"Spark's Python processes: {median_of(ours, 'python_cpu_s'):.1f} s CPU from SeaTide's Spark home vs "
          f"{median_of(theirs, 'python_cpu_s'):.1f} s from PySpark's ({result['cpu_ratio']:.2f}x); seatide run "
          f"{median_of(ours, 'wall_s'):.1f} vs {median_of(theirs, 'wall_s'):.1f} s ({result['wall_ratio']:.2f}x)"
          + ("; plot written" if plotted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
