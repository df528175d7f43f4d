"""The store's server restarted under a checkpointing STREAMING job: how soon it checkpoints again.

    .venv/bin/python bench/store_restart.py [--restarts 6] [--hog 0] [--out bench/results/store_restart]

A private PostgreSQL holds the store; one coordinator, one worker and one STREAMING job
(checkpoint every 1 s, the product's default timeouts: heartbeats every 1 s; ``--harness``
for the fault tests' shorter ones, heartbeats every 0.5 s). Each round has
two sides, alternating in the same run so that both see the same load:

- *restart*: ``pg_ctl restart -m fast -w`` (every session ends, as in an operator's restart
  or a managed failover), then the seconds from the server accepting connections again to the
  job's next completed checkpoint;
- *steady*: no restart, the seconds from a moment taken the same way to the job's next
  checkpoint: what the checkpoint interval alone costs a reader who asks at a random moment.

The ratio restart/steady says how much of the wait is the restart's. The driver must be the
same process throughout (one driver, never replaced: printed as ``drivers``). ``--hog N``
runs ``stress-ng --cpu N`` through the whole run to measure under load; the 1-minute load
average is printed for each sample. Each restart's driver log lines that say which step the
store's restart cut off (``taken again on a new session``) are counted per step.

Writes ``<out>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from seatide.store.paths import driver_log_path  # noqa: E402
from seatide.testing.cluster import Cluster, wait_for  # noqa: E402
from seatide.testing.driver_processes import DriverWatch  # noqa: E402
from seatide.testing.jobs import streaming_job  # noqa: E402
from seatide.testing.servers import PrivatePostgres  # noqa: E402

JOB = "bench-store-restart"
TAKEN_AGAIN = re.compile(r"([\w .-]+): the store ended its session")


def _checkpoint(cluster: Cluster) -> int:
    try:
        return cluster.last_checkpoint(JOB)
    except Exception:          # the store is restarting: no answer yet
        cluster.store.engine.dispose()
        return -1


def _next_checkpoint(cluster: Cluster, before: int, start: float) -> float:
    """Seconds from ``start`` (monotonic) to the store holding a checkpoint after ``before``."""
    wait_for(lambda: _checkpoint(cluster) > before, 180, interval=0.02, message="the next checkpoint")
    return time.monotonic() - start


def _steps_taken_again(log_path: str, offset: int) -> tuple[dict, int]:
    with open(log_path, errors="replace") as handle:
        handle.seek(offset)
        text = handle.read()
    counts: dict[str, int] = {}
    for match in TAKEN_AGAIN.finditer(text):
        step = match.group(1).strip()
        counts[step] = counts.get(step, 0) + 1
    return counts, offset + len(text.encode())


# seatide.timeouts.Timeouts' defaults, in the harness's terms
DEFAULTS = {"driver": 10.0, "worker": 10.0, "self_fence": 6.0, "interval": 1.0}


def run(restarts: int, tmp: str, harness: bool) -> dict:
    server = PrivatePostgres().start()
    url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    cluster = Cluster(url, f"{tmp}/data") if harness else Cluster(url, f"{tmp}/data", timeouts=DEFAULTS)
    samples = []
    try:
        cluster.coordinator("c1")
        cluster.worker("w1", slots=1)
        cluster.submit(streaming_job(f"{tmp}/out", interval_ms=1000, read_interval_ms=200), JOB, timeout=120)
        wait_for(lambda: _checkpoint(cluster) >= 3, 300, message="the job checkpointing")
        [attempt] = cluster.attempts(JOB)
        log_path = driver_log_path(cluster.data_dir, JOB, attempt.attempt_id)
        offset = os.path.getsize(log_path)
        with DriverWatch(JOB, interval=0.2) as watch:
            for index in range(restarts):
                # steady: the same wait, no restart. Each side starts at a random moment of the
                # checkpoint interval, not just after a checkpoint was seen.
                time.sleep(random.uniform(0, 1))
                before = _checkpoint(cluster)
                steady = _next_checkpoint(cluster, before, time.monotonic())
                # restart
                time.sleep(random.uniform(0, 1))
                before = _checkpoint(cluster)
                began = time.monotonic()
                server.restart_server("fast")
                up = time.monotonic()
                back = _next_checkpoint(cluster, before, up)
                # the next checkpoint after that: the job's pace once back
                settled = _next_checkpoint(cluster, _checkpoint(cluster), time.monotonic())
                steps, offset = _steps_taken_again(log_path, offset)
                sample = {"steady_s": round(steady, 3), "server_down_s": round(up - began, 3),
                          "back_s": round(back, 3), "next_after_back_s": round(settled, 3),
                          "steps_taken_again": steps, "load_1m": round(os.getloadavg()[0], 1)}
                samples.append(sample)
                print(f"round {index + 1}: restart -> checkpoint {back:.2f} s (server down {up - began:.2f} s), "
                      f"steady {steady:.2f} s, load {sample['load_1m']}, taken again: {steps}", flush=True)
        attempts = [(a.attempt_id, a.state) for a in cluster.attempts(JOB)]
        return {"samples": samples, "drivers_at_once_max": watch.max_seen, "driver_pids": sorted(watch.pids_seen),
                "attempts": attempts}
    finally:
        cluster.stop_all()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--harness", action="store_true", help="the fault tests' timeouts, not the defaults")
    parser.add_argument("--hog", type=int, default=0, help="stress-ng --cpu N beside the run (0: none)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("SEATIDE_BENCH_RESULTS")
                                                      or os.path.join(os.path.dirname(__file__), "results"),
                                                      "store_restart"))
    args = parser.parse_args()
    hog = None
    if args.hog:
        if not shutil.which("stress-ng"):
            sys.exit("store_restart: --hog needs stress-ng (Debian package stress-ng)")
        hog = subprocess.Popen(["stress-ng", "--cpu", str(args.hog)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="seatide-bench-restart-")
    try:
        result = run(args.restarts, tmp, args.harness)
    finally:
        if hog:
            hog.terminate()
            hog.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    backs = [s["back_s"] for s in result["samples"]]
    steadies = [s["steady_s"] for s in result["samples"]]
    loads = [s["load_1m"] for s in result["samples"]]
    result["summary"] = {
        "back_median_s": round(statistics.median(backs), 3), "back_max_s": max(backs),
        "steady_median_s": round(statistics.median(steadies), 3),
        "ratio_back_to_steady": round(statistics.median(backs) / statistics.median(steadies), 2),
        "load_1m": [min(loads), max(loads)], "hog_cpus": args.hog,
        "timeouts": "harness" if args.harness else "defaults"}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump(result, handle, indent=2)
    summary = result["summary"]
    print(f"store restart -> checkpointing again: median {summary['back_median_s']} s (max {summary['back_max_s']}), "
          f"steady wait {summary['steady_median_s']} s: {summary['ratio_back_to_steady']}x; drivers at once "
          f"max {result['drivers_at_once_max']}, attempts {result['attempts']}; load {summary['load_1m']}")


if __name__ == "__main__":
    main()
