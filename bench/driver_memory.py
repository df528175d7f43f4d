"""Memory of one SeaTide driver, for sizing a worker's --slots (deploy/sizing.md).

    PYTHONPATH=src .venv/bin/python bench/driver_memory.py [--rows 1000000] [--master local[2]]

Runs one checkpointed BATCH job (FakeSource -> LocalFile parquet) through `seatide run` (a
real process tree: the CLI with its embedded coordinator and worker, the driver, its JVM and
Spark's Python workers) and samples every process's RSS with psutil every 0.25 s:

* idle: the driver held at `driver.batch_start` before its first batch (SparkSession up,
  the plan built, no data read), once its RSS has stopped growing;
* running: the peak while it writes ``--rows`` rows in one micro-batch.

The numbers are for the driver's process tree (the Python driver, its JVM, Python workers
the JVM starts): RSS of each part and PSS of the whole (what the tree really costs: forked
Python workers share pages), and, apart, the RSS of the `seatide run` process. Writes JSON
to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

JOB = """
env {{
  job.name = "memory", job.mode = BATCH, parallelism = 2
  checkpoint.interval = 1000
  micro-batch.max-rows = {rows}
  spark.master = "{master}"
}}
source {{
  FakeSource {{
    row.num = {per_reader}
    split.num = 1
    sequence.field = "id"
    schema = {{ fields {{ id = bigint, name = string, value = double }} }}
  }}
}}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet" }} }}
"""
MB = 1024 * 1024


def _driver(job_id: str) -> psutil.Process | None:
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "seatide.runtime.driver" in cmd and job_id in cmd and proc.parent() \
                and "seatide.runtime.driver" not in (proc.parent().cmdline() or []):
            return proc
    return None


def _tree_rss(root: psutil.Process) -> dict:
    """RSS by part of the driver's tree, and PSS of all of it: Spark's Python workers are forked
    from one daemon and share most pages, so their RSS summed counts those pages many times."""
    rss = {"driver_python_mb": 0.0, "driver_jvm_mb": 0.0, "python_workers_mb": 0.0}
    pss = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
            name = os.path.basename((proc.cmdline() or [""])[0])
        except psutil.Error:
            continue
        part = ("driver_python_mb" if proc.pid == root.pid else "driver_jvm_mb" if name == "java"
                else "python_workers_mb")
        rss[part] += info.rss / MB
        pss += info.pss / MB
    return {**rss, "total_rss_mb": sum(rss.values()), "total_pss_mb": pss}


def _wait(condition, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "driver_memory.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seatide-mem-") as tmp:
        conf = os.path.join(tmp, "job.conf")
        with open(conf, "w") as handle:
            handle.write(JOB.format(rows=args.rows, per_reader=args.rows // 2, master=args.master,
                                    out=os.path.join(tmp, "out")))
        gate = os.path.join(tmp, "gate")
        env = dict(os.environ, SEATIDE_FAILPOINTS=f"driver.batch_start=gate:0:{gate}")
        started = time.time()
        run = subprocess.Popen([sys.executable, "-m", "seatide.cli.main", "run", conf, "--job-id", "mem",
                                "--data-dir", os.path.join(tmp, "d")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        driver = _wait(lambda: _driver("mem"), 120, "the driver")
        # idle: held at the gate; wait until the tree's RSS is steady (3 samples within 2 MB)
        samples: list[float] = []

        def steady():
            samples.append(_tree_rss(driver)["total_pss_mb"])
            recent = samples[-12:]
            return len(recent) == 12 and max(recent) - min(recent) < 2 and any(
                os.path.basename((c.cmdline() or [""])[0]) == "java" for c in driver.children())
        _wait(steady, 300, "a steady idle driver")
        idle = _tree_rss(driver)
        idle["seatide_run_mb"] = psutil.Process(run.pid).memory_info().rss / MB
        open(gate, "w").close()
        peak: dict = dict(idle)
        while run.poll() is None:
            try:
                now = _tree_rss(driver)
            except psutil.Error:
                break
            if now["total_pss_mb"] > peak["total_pss_mb"]:
                peak = now
            time.sleep(0.25)
        run.wait()
        if run.returncode != 0:
            raise SystemExit(f"seatide run failed ({run.returncode}):\n{run.stderr.read()[-3000:]}")
    result = {"rows": args.rows, "master": args.master, "idle": idle, "running_peak": peak,
              "wall_s": round(time.time() - started, 1)}
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
