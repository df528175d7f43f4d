"""Where the test suite's CPU goes, by kind of process.

    .venv/bin/python bench/suite_cpu.py [--out bench/results/suite_cpu] [-- PYTEST ARGS...]

Runs pytest as ``scripts/test`` does (two processes, worksteal; the arguments after ``--``
go to pytest, e.g. a directory) and samples the process table every 0.3 s meanwhile: each
process's CPU (user + system, from ``/proc/PID/stat``) at its last sample, its kind read off
its command line. Processes alive before the run (a database server) count from their first
sample. A process that lives less than a sample is missed, and one's last 0.3 s may be: the
totals are a floor. The machine's busy and idle time over the run come from ``/proc/stat``.

The question it answers: how much of the suite is the real driver processes its fault
stories need (a JVM and Python each), and how much is the rest. Writes ``<out>.json`` and,
with matplotlib, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.side_by_side import RESULTS, pyplot, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.3

# (kind, test on the command line and the process's own name), first match wins. The shared
# session of a pytest process is the one named "seatide-tests" (tests/conftest.py).
KINDS = [
    ("JVM launcher", lambda args, comm: comm == "java" and "launcher.Main" in args),
    ("Spark standalone JVM",
     lambda args, comm: comm == "java" and (".deploy.master" in args or ".deploy.worker" in args)),
    ("pytest's shared session JVM", lambda args, comm: comm == "java" and "spark.app.name=seatide-tests" in args),
    ("driver JVM", lambda args, comm: comm == "java" and "SparkSubmit" in args),
    ("other JVM", lambda args, comm: comm == "java"),
    ("driver (Python)", lambda args, comm: "seatide.runtime.driver" in args),
    ("Python zygote", lambda args, comm: "python_zygote" in args or "seatide-zygote-" in args),
    ("Spark's Python workers", lambda args, comm: "pyspark" in args),
    ("coordinator", lambda args, comm: "seatide" in args and " coordinator" in args),
    ("worker", lambda args, comm: "seatide" in args and "cluster worker" in args),
    # pytest-xdist starts its processes as `python -c "...exec(eval(sys.stdin.readline()))"`
    ("pytest", lambda args, comm: "pytest" in args or "execnet" in args or "sys.stdin.readline" in args),
    ("other seatide commands", lambda args, comm: "seatide" in args),
    ("PostgreSQL", lambda args, comm: comm.startswith("postgres")),
    ("MariaDB", lambda args, comm: comm.startswith("mariadb")),
    ("browser", lambda args, comm: "chrom" in comm),
]


def kind_of(args: str, comm: str) -> str:
    return next((kind for kind, test in KINDS if test(args, comm)), f"other ({comm})")


def machine_times() -> tuple[float, float]:
    """Busy and idle seconds of all CPUs since boot."""
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / TICK, idle / TICK


class ProcessSampler(threading.Thread):
    """Every process's CPU at its first and last sample; ``baseline``: the samples taken before
    the run, whose processes count from there (those started later count from zero)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.first: dict[tuple[str, str], float] = {}    # (pid, start time) -> CPU at the first sample
        self.last: dict[tuple[str, str], tuple[str, float]] = {}
        self.baseline = True
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_S)
        self.sample()

    def sample(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    stat = handle.read()
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    args = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            key, cpu = (pid, fields[19]), (int(fields[11]) + int(fields[12])) / TICK
            self.first.setdefault(key, cpu if self.baseline else 0.0)
            # An exiting process has no command line left: it keeps the kind it was given.
            kind = self.last[key][0] if key in self.last and not args else kind_of(args, comm)
            self.last[key] = (kind, cpu)

    def by_kind(self) -> dict[str, dict]:
        kinds: dict[str, dict] = {}
        for key, (kind, cpu) in self.last.items():
            used = cpu - self.first.get(key, 0.0)
            entry = kinds.setdefault(kind, {"cpu_s": 0.0, "processes": 0})
            entry["cpu_s"] += used
            entry["processes"] += used > 0
        return dict(sorted(kinds.items(), key=lambda item: -item[1]["cpu_s"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(RESULTS, "suite_cpu"))
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs (default: everything)")
    args = parser.parse_args()
    sampler = ProcessSampler()
    sampler.sample()            # what runs already counts from here
    sampler.baseline = False
    busy0, idle0 = machine_times()
    began = time.monotonic()
    sampler.start()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
               os.environ.get("SEATIDE_TEST_PROCESSES", "2"), "--dist", "worksteal", *args.pytest_args]
    code = subprocess.call(command, cwd=ROOT)
    wall = time.monotonic() - began
    sampler.stop.set()
    sampler.join()
    busy1, idle1 = machine_times()
    kinds = sampler.by_kind()
    counted = sum(k["cpu_s"] for k in kinds.values())
    drivers = sum(kinds.get(k, {}).get("cpu_s", 0.0) for k in
                  ("driver JVM", "JVM launcher", "driver (Python)", "Python zygote", "Spark's Python workers"))
    result = {"pytest_args": args.pytest_args, "exit_code": code, "wall_s": round(wall, 1),
              "machine_busy_cpu_s": round(busy1 - busy0, 1), "machine_idle_cpu_s": round(idle1 - idle0, 1),
              "cpus": os.cpu_count(), "counted_cpu_s": round(counted, 1),
              "real_drivers_cpu_s": round(drivers, 1),
              "real_driver_processes": kinds.get("driver (Python)", {}).get("processes", 0),
              "kinds": {k: {"cpu_s": round(v["cpu_s"], 1), "processes": v["processes"]} for k, v in kinds.items()}}
    write_json(args.out + ".json", result)
    for kind, entry in result["kinds"].items():
        print(f"{entry['cpu_s']:8.1f} s {entry['processes']:5d}  {kind}")
    print(f"wall {wall:.0f} s; machine busy {result['machine_busy_cpu_s']:.0f} s, idle "
          f"{result['machine_idle_cpu_s']:.0f} s of CPU; real drivers {drivers:.0f} s "
          f"({result['real_driver_processes']} driver processes) of {counted:.0f} s counted")
    plot(result, args.out + ".png")
    return code


def plot(result: dict, path: str) -> None:
    plt = pyplot()
    if plt is None:
        return
    kinds = [(k, v["cpu_s"]) for k, v in result["kinds"].items() if v["cpu_s"] >= 1.0]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(kinds) + 1.5))
    ax.barh([k for k, _ in kinds][::-1], [v for _, v in kinds][::-1], color="#4a7bb7")
    ax.set_xlabel("CPU seconds")
    ax.set_title(f"test suite: {result['wall_s']:.0f} s on {result['cpus']} CPUs, "
                 f"{result['machine_busy_cpu_s']:.0f} CPU-s busy")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
