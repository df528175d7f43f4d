"""A driver session's start with the JVM class archive vs without it, alternating, in one run.

    .venv/bin/python bench/jvm_archive.py [--rounds 4] [--out bench/results/jvm_archive]

Each sample is a fresh Python process that builds a session the way a driver does
(``seatide.runtime.session.build_session``), runs one small query, and reports the wall
time to that query's result and the CPU its JVM used so far (from /proc). Samples alternate
``SEATIDE_JVM_ARCHIVE=1`` and ``=0``, so both sides see the same machine load. The archive
must exist (``seatide jvm-archive``). Writes ``<out>.json`` and, with matplotlib, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from seatide.runtime import class_archive  # noqa: E402
from bench.side_by_side import alternate, draw_alternating, median_of, write_json  # noqa: E402

SAMPLE = """
import json, os, time
started = time.perf_counter()
from seatide.runtime.session import build_session
spark = build_session("jvm-archive-bench", {"spark.master": "local[2]"})
spark.range(100000).selectExpr("id % 10 as k").groupBy("k").count().collect()
wall = time.perf_counter() - started
pid = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{pid}/stat") as handle:
    fields = handle.read().rsplit(")", 1)[1].split()
cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
with open(f"/proc/{pid}/maps") as handle:
    mapped = any(line.rstrip().endswith(".jsa") and "spark-driver-" in line for line in handle)
print(json.dumps({"wall_s": wall, "jvm_cpu_s": cpu, "mapped": mapped}))
spark.stop()
"""


def sample(archive: bool) -> dict:
    env = {**os.environ, class_archive.ENABLED_ENV: "1" if archive else "0"}
    done = subprocess.run([sys.executable, "-c", SAMPLE], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"a sample failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["mapped"] != archive:
        raise SystemExit(f"archive={archive} but the JVM {'did not map' if archive else 'mapped'} it")
    return result


def plot(result: dict, path: str) -> bool:
    return draw_alternating(path, {"with the archive": result["with"], "without": result["without"]},
                            [("jvm_cpu_s", "JVM CPU seconds"), ("wall_s", "seconds to the first result")],
                            f"session start + one query: JVM CPU {result['cpu_ratio']:.2f}x, "
                            f"wall {result['wall_ratio']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "jvm_archive"))
    args = parser.parse_args()
    if not os.path.isfile(class_archive.archive_path()):
        print("no class archive: build it first (.venv/bin/seatide jvm-archive)", file=sys.stderr)
        return 2
    samples = alternate(args.rounds, {"archive on": lambda: sample(True), "archive off": lambda: sample(False)})
    with_archive, without = samples["archive on"], samples["archive off"]
    result = {"with": with_archive, "without": without, "load_avg": os.getloadavg(),
              "cpu_ratio": median_of(with_archive, "jvm_cpu_s") / median_of(without, "jvm_cpu_s"),
              "wall_ratio": median_of(with_archive, "wall_s") / median_of(without, "wall_s")}
    write_json(args.out + ".json", result)
    plotted = plot(result, args.out + ".png")
    print(f"JVM CPU median {median_of(with_archive, 'jvm_cpu_s'):.1f} s with vs {median_of(without, 'jvm_cpu_s'):.1f} s "
          f"without ({result['cpu_ratio']:.2f}x); wall {median_of(with_archive, 'wall_s'):.1f} vs "
          f"{median_of(without, 'wall_s'):.1f} s ({result['wall_ratio']:.2f}x)" + ("; plot written" if plotted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
