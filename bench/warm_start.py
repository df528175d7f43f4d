"""Submit -> first committed batch of a small job, on a worker with a warm driver vs cold.

    .venv/bin/python bench/warm_start.py [--store sqlite|postgresql] [--runs 3] [--json out.json]

One coordinator. Each run starts a fresh worker, alternately with ``--warm-drivers 0``
(cold) and ``--warm-drivers 1`` (warm: measured once its warm driver has said Spark is
ready), submits a small BATCH job with checkpointing (FakeSource, 2 micro-batches) and
times from the submit request to the job's first checkpoint in the store, then to
FINISHED. Cold and warm alternate so load on the machine falls on both alike; the ratio
warm/cold is the number that carries over to another machine.

``--zygote-compare``: warm drivers with the Python zygote (runtime/python_zygote.py) against
warm drivers without it (``SEATIDE_PYTHON_ZYGOTE=0``), alternating, instead of warm vs cold.
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
from seatide.testing.cluster import Cluster, wait_for  # noqa: E402
from seatide.testing.jobs import batch_job  # noqa: E402
from tests.cluster.warm import ready_warm_pid  # noqa: E402


# mode -> (a warm driver?, the worker's environment)
MODES = {"cold": (False, None), "warm": (True, None), "warm-no-zygote": (True, {"SEATIDE_PYTHON_ZYGOTE": "0"})}


def one_run(cluster: Cluster, tmp: str, index: int, mode: str, patience: float) -> dict:
    """One sample; a sample that outlasts ``patience`` (a host at load 25 can) is kept as TIMEOUT."""
    warm, env = MODES[mode]
    name = f"{mode}{index}"
    sample = {"mode": mode, "load_1min": round(os.getloadavg()[0], 1)}
    worker = cluster.worker(f"w-{name}", extra=["--warm-drivers", "1" if warm else "0"], env=env)
    try:
        if warm:
            ready_warm_pid(worker, timeout=patience)
        started = time.time()
        cluster.submit(batch_job(f"{tmp}/out-{name}", rows=100, rows_per_batch=50), name)
        wait_for(lambda: (cluster.job_info(name)["checkpoint"]["lastCheckpointId"] or 0) >= 1, patience,
                 interval=0.05, message=f"{name}'s first checkpoint")
        sample["first_batch_s"] = round(time.time() - started, 2)
        cluster.wait_status(name, {"FINISHED", "FAILED", "CANCELED"}, timeout=patience)
        sample["finished_s"] = round(time.time() - started, 2)
        sample["status"] = cluster.job(name).status
    except AssertionError as exc:
        sample["status"] = f"TIMEOUT: {exc}"
    finally:
        worker.kill()
    return sample


def summary(store: str, samples: list[dict], modes=("cold", "warm")) -> dict:
    result = {"store": store, "samples": samples}
    for mode in modes:
        ok = [s for s in samples if s["mode"] == mode and s.get("status") == "FINISHED"]
        result[mode] = ({key: statistics.median(s[key] for s in ok) for key in ("first_batch_s", "finished_s")}
                        | {"samples": len(ok)}) if ok else None
    baseline, better = modes
    if result[baseline] and result[better]:
        result[f"{better}_over_{baseline}_first_batch".replace("-", "_")] = round(
            result[better]["first_batch_s"] / result[baseline]["first_batch_s"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--patience", type=float, default=900.0, help="seconds a sample may take")
    parser.add_argument("--zygote-compare", action="store_true", help="warm with vs without the Python zygote")
    args = parser.parse_args()
    modes = ("warm-no-zygote", "warm") if args.zygote_compare else ("cold", "warm")
    samples: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        url, drop = store_url(args.store, tmp)
        cluster = Cluster(url, f"{tmp}/data", plan_warm_up=True)
        try:
            cluster.coordinator("c1")
            for index in range(args.runs):
                for mode in modes:
                    samples.append(one_run(cluster, tmp, index, mode, args.patience))
                    print(samples[-1], flush=True)
                    if args.json:          # after every sample: a long run stopped early keeps its numbers
                        with open(args.json, "w") as handle:
                            json.dump(summary(args.store, samples, modes), handle, indent=2)
        finally:
            cluster.stop_all()
            drop()
    print(json.dumps({k: v for k, v in summary(args.store, samples, modes).items() if k != "samples"}, indent=2))


if __name__ == "__main__":
    main()
