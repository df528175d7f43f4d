"""Where the test suite's CPU goes, by kind of process.

    .venv/bin/python bench/suite_cpu.py [--out bench/results/suite_cpu] [--by-test] [-- PYTEST ARGS...]

Runs pytest as ``scripts/test`` does (two processes, worksteal; the arguments after ``--``
go to pytest, e.g. a directory) and samples the process table every 0.3 s meanwhile: each
process's CPU (user + system, from ``/proc/PID/stat``) at its last sample, its kind read off
its command line. Processes alive before the run (a database server) count from their first
sample. A process that lives less than a sample is missed, and one's last 0.3 s may be: the
totals are a floor. The machine's busy and idle time over the run come from ``/proc/stat``.

The question it answers: how much of the suite is the real driver processes its fault
stories need (a JVM and Python each), and how much is the rest. ``--by-test`` also charges each
sample's CPU to the test the process's pytest ancestor runs (``bench/suite_cpu_tests.py``, a plugin
each pytest process loads): a process reaped by its parent adds what it used since its last sample
there (Linux counts a waited-for child's CPU to its parent), so short-lived processes count too;
an orphan's last sample is lost, and servers started apart (``pg_ctl``) count to no test. Each
test's CPU is also split by kind of process (``by_test_kinds``). Under a CPU-bound run a test's
wall time is a poor measure of what it costs: this is the one to cut by. Writes ``<out>.json``
and, with matplotlib, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
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

    def __init__(self, tests_dir: str | None = None):
        super().__init__(daemon=True)
        self.tests_dir = tests_dir          # --by-test: where each pytest process names its running test
        self.seen: dict[str, tuple[str, float, str]] = {}   # pid -> (ppid, CPU with reaped children, kind) at the last sample
        self.by_test: dict[str, dict[str, float]] = {}      # test -> kind -> CPU
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
        now: dict[str, tuple[str, float, str]] = {}
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
            now[pid] = (fields[1], cpu + (int(fields[13]) + int(fields[14])) / TICK, kind)
        if self.tests_dir is not None:
            self._charge(now)

    def _charge(self, now: dict[str, tuple[str, float, str]]) -> None:
        """Charge each process's CPU since the last sample (its own and its reaped children's, less what
        those children were charged while alive) to the test its pytest ancestor runs, under the
        process's kind (a reaped child's last moments count to its parent's)."""
        gone: dict[str, float] = {}
        for pid, (ppid, total, _) in self.seen.items():
            if pid not in now:
                gone[ppid] = gone.get(ppid, 0.0) + total
        for pid, (ppid, total, kind) in now.items():
            before = self.seen.get(pid)
            # a process new since the last sample used all it has in the interval (none on the first sample)
            used = total - before[1] - gone.get(pid, 0.0) if before else (total if self.seen else 0.0)
            if used > 0:
                kinds = self.by_test.setdefault(self._test_of(pid, now), {})
                kinds[kind] = kinds.get(kind, 0.0) + used
        self.seen = now

    def _test_of(self, pid: str, now: dict) -> str:
        for _ in range(40):
            try:
                with open(os.path.join(self.tests_dir, pid)) as handle:
                    return handle.read() or "(between tests)"     # caught mid-write
            except OSError:
                pid = now.get(pid, ("1", 0.0, ""))[0]
                if pid in ("0", "1"):
                    break
        return "(no test)"

    def by_kind(self) -> dict[str, dict]:
        kinds: dict[str, dict] = {}
        for key, (kind, cpu) in self.last.items():
            used = cpu - self.first.get(key, 0.0)
            entry = kinds.setdefault(kind, {"cpu_s": 0.0, "processes": 0})
            entry["cpu_s"] += used
            entry["processes"] += used > 0
        return dict(sorted(kinds.items(), key=lambda item: -item[1]["cpu_s"]))


def pytest_command(pytest_args: list[str], tests_dir: str | None, environ=os.environ) -> tuple[list[str], dict]:
    """pytest's command line and environment, as scripts/test runs it; with ``tests_dir``, every
    pytest process also loads the plugin that names its running test. The plugin is named as a
    module of the ``bench`` directory, which ``python -m pytest`` finds from its working directory
    (ROOT): a ``bench`` entry on PYTHONPATH would reach every driver the tests start, and a driver
    with a PYTHONPATH entry of neither SeaTide nor Spark runs without its Python zygote
    (seatide/runtime/zygote_choice.py), so the run measured would not be the suite's."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
               environ.get("SEATIDE_TEST_PROCESSES", "2"), "--dist", "worksteal", *pytest_args]
    env = dict(environ)
    if tests_dir is not None:
        command[3:3] = ["-p", "bench.suite_cpu_tests"]
        env["SEATIDE_CPU_TESTS_DIR"] = tests_dir
    return command, env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(RESULTS, "suite_cpu"))
    parser.add_argument("--by-test", action="store_true", help="also charge the CPU to the test running")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs (default: everything)")
    args = parser.parse_args()
    tests_dir = tempfile.mkdtemp(prefix="suite-cpu-") if args.by_test else None
    sampler = ProcessSampler(tests_dir)
    sampler.sample()            # what runs already counts from here
    sampler.baseline = False
    busy0, idle0 = machine_times()
    began = time.monotonic()
    sampler.start()
    command, env = pytest_command(args.pytest_args, tests_dir)
    code = subprocess.call(command, cwd=ROOT, env=env)
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
    if tests_dir is not None:
        totals = {t: sum(kinds.values()) for t, kinds in sampler.by_test.items()}
        result["by_test"] = {t: round(v, 1) for t, v in sorted(totals.items(), key=lambda i: -i[1])}
        result["by_test_kinds"] = {t: {k: round(v, 1) for k, v in sorted(sampler.by_test[t].items(), key=lambda i: -i[1])
                                       if v >= 0.05} for t in result["by_test"]}
        shutil.rmtree(tests_dir, ignore_errors=True)
    write_json(args.out + ".json", result)
    for kind, entry in result["kinds"].items():
        print(f"{entry['cpu_s']:8.1f} s {entry['processes']:5d}  {kind}")
    for test, cpu in list(result.get("by_test", {}).items())[:30]:
        print(f"{cpu:8.1f} s  {test}")
        if test.startswith("tests/"):       # where a test's CPU went, its five costliest kinds
            print("            " + "; ".join(f"{kind} {v:.1f}" for kind, v in list(result["by_test_kinds"][test].items())[:5]))
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
