"""Submit -> first committed batch of a small job, on a worker with a warm driver vs cold.

    .venv/bin/python bench/warm_start.py [--store sqlite|postgresql] [--runs 3] [--json out.json]

One coordinator. Each run starts a fresh worker, alternately with ``--warm-drivers 0``
(cold) and ``--warm-drivers 1`` (warm: measured once its warm driver has said Spark is
ready), submits a small BATCH job with checkpointing (FakeSource, 2 micro-batches) and
times from the submit request to the job's first checkpoint in the store, then to
FINISHED. Cold and warm alternate so load on the machine falls on both alike; the ratio
warm/cold is the number that carries over to another machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.failover import store_url  # noqa: E402
from tests.cluster.harness import Cluster, wait_for  # noqa: E402
from tests.cluster.jobs import batch_job  # noqa: E402
from tests.cluster.warm import ready_warm_pid  # noqa: E402


def one_run(cluster: Cluster, tmp: str, index: int, warm: bool) -> dict:
    name = f"{'warm' if warm else 'cold'}{index}"
    worker = cluster.worker(f"w-{name}", extra=["--warm-drivers", "1" if warm else "0"])
    if warm:
        ready_warm_pid(worker)
    started = time.time()
    cluster.submit(batch_job(f"{tmp}/out-{name}", rows=100, rows_per_batch=50), name)
    wait_for(lambda: (cluster.job_info(name)["checkpoint"]["lastCheckpointId"] or 0) >= 1, 300, interval=0.05,
             message=f"{name}'s first checkpoint")
    first_batch = time.time() - started
    cluster.wait_status(name, {"FINISHED", "FAILED", "CANCELED"}, timeout=300)
    finished = time.time() - started
    status = cluster.job(name).status
    worker.kill()
    return {"mode": "warm" if warm else "cold", "first_batch_s": round(first_batch, 2),
            "finished_s": round(finished, 2), "status": status}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, drop = store_url(args.store, tmp)
        cluster = Cluster(url, f"{tmp}/data")
        try:
            cluster.coordinator("c1")
            samples = []
            for index in range(args.runs):
                for warm in (False, True):
                    samples.append(one_run(cluster, tmp, index, warm))
                    print(samples[-1], flush=True)
        finally:
            cluster.stop_all()
            drop()
    load = os.getloadavg()[0]
    result = {"store": args.store, "runs": args.runs, "load_1min_at_end": round(load, 1), "samples": samples}
    for mode in ("cold", "warm"):
        ok = [s for s in samples if s["mode"] == mode and s["status"] == "FINISHED"]
        result[mode] = {key: statistics.median(s[key]) for key in ("first_batch_s", "finished_s")} if ok else None
    if result["cold"] and result["warm"]:
        result["warm_over_cold_first_batch"] = round(
            result["warm"]["first_batch_s"] / result["cold"]["first_batch_s"], 2)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
