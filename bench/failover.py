"""Failover, with liveness locks and without them (the lease and heartbeats alone), in one run.

    .venv/bin/python bench/failover.py [--stores sqlite,postgresql] [--leader-kills 5]
                                       [--worker-kills 3] [--worker-stores postgresql]
                                       [--out bench/results/failover]

Leader: seconds from SIGKILL of the leader to a surviving coordinator answering
/api/v1/overview with a higher epoch (lease ttl 2 s, renew 0.5 s): median of
``--leader-kills`` on each store.

Worker: seconds from SIGKILL of the worker running a STREAMING job (checkpoint every
1 s) to the job's first checkpoint completed after the kill — its pipelines restored and
committing again — and to its replacement attempt RUNNING. One job is killed
``--worker-kills`` times (a fresh worker joins before each kill); median reported.
Timeouts are the fault tests' (seatide/testing/cluster.py: worker lost after 5 s).

"before" runs every process with SEATIDE_LIVENESS_LOCKS=0, "after" with the locks, on
the same machine in the same run; the ratio after/before is the result. With
``--worker-compare warm`` the worker runs compare instead "cold" (no warm drivers) with
"warm" (one warm driver per worker, ready before each kill), both with the locks. Writes
``<out>.json`` and, when matplotlib is installed (``pip install -e .[bench]``), ``<out>.png``.
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


from seatide.testing.stores import scratch_store  # noqa: E402

from seatide.testing.cluster import Cluster, http, wait_for  # noqa: E402
from seatide.testing.jobs import streaming_job  # noqa: E402
from tests.cluster.warm import ready_warm_pid  # noqa: E402

MODES = {"before": {"SEATIDE_LIVENESS_LOCKS": "0"}, "after": {"SEATIDE_LIVENESS_LOCKS": "1"}}
# --worker-compare warm: mode -> warm drivers per worker, liveness locks on in both
WARM_MODES = {"cold": 0, "warm": 1}
LABELS = {"before": "lease + heartbeats only", "after": "liveness locks",
          "cold": "cold driver (locks)", "warm": "warm driver (locks)"}


def store_url(kind: str, tmp: str) -> tuple[str, callable]:
    return scratch_store(kind, tmp, "seatide_bench")


class ModeCluster(Cluster):
    """The harness cluster, every process started with the mode's environment."""

    mode_env: dict = {}

    def _spawn(self, name, args, url=None, env=None, **more):
        return super()._spawn(name, args, url, {**self.mode_env, **(env or {})}, **more)


def _cluster(kind: str, tmp: str, env: dict, warm_drivers: int = 0) -> tuple[ModeCluster, callable]:
    url, drop = store_url(kind, tmp)
    cluster = ModeCluster(url, f"{tmp}/data", warm_drivers=warm_drivers)
    cluster.mode_env = env
    return cluster, drop


def leader_failover(cluster: Cluster, kills: int) -> list[float]:
    cluster.coordinator("c0")
    samples = []
    for i in range(1, kills + 1):
        cluster.coordinator(f"c{i}")
        cluster.leader_has_reconciled(0.5)
        lease = cluster.leader()
        victim = cluster.leader_proc()
        survivors = [p for p in cluster.procs if p.url and p.alive and p is not victim]
        victim.kill()
        killed = time.time()
        wait_for(lambda: any((http("GET", p.url + "/api/v1/overview", timeout=1)[1]["leader"] or {})
                             .get("epoch", 0) > lease.epoch for p in survivors), 20, interval=0.02,
                 message="a new leader")
        samples.append(time.time() - killed)
    return samples


def _last_checkpoint(cluster: Cluster, job_id: str) -> int:
    return cluster.job_info(job_id)["checkpoint"]["lastCheckpointId"] or 0


def worker_loss(cluster: Cluster, tmp: str, kills: int, until: str) -> list[dict]:
    """Per kill: seconds to the replacement attempt assigned, RUNNING, and (``until`` =
    committing) to its first checkpoint."""
    job_id = "bench-worker-loss"
    cluster.coordinator("c1")
    cluster.worker("w0", slots=1)
    cluster.submit(streaming_job(f"{tmp}/out", interval_ms=1000, retries=kills + 5), job_id, timeout=60)
    samples = []
    for i in range(1, kills + 1):
        if until == "committing":
            wait_for(lambda: _last_checkpoint(cluster, job_id) >= 2 and any(
                a.state == "RUNNING" for a in cluster.attempts(job_id)), 300, message="checkpoints")
        else:
            wait_for(lambda: any(a.state == "RUNNING" for a in cluster.attempts(job_id)), 300,
                     message="a running attempt")
        spare = cluster.worker(f"w{i}", slots=1)
        if cluster.warm_drivers:      # the spare's warm driver is up before the kill, as in a steady fleet
            ready_warm_pid(spare, timeout=300)
        current = [a for a in cluster.attempts(job_id) if a.state == "RUNNING"][-1]
        victim = next(p for p in cluster.procs if p.name == current.worker_id)
        before = _last_checkpoint(cluster, job_id)
        victim.kill()
        killed = time.time()
        wait_for(lambda: any(a.attempt_id > current.attempt_id for a in cluster.attempts(job_id)), 300,
                 interval=0.02, message="a new attempt")
        sample = {"assigned": time.time() - killed}
        wait_for(lambda: any(a.state == "RUNNING" and a.attempt_id > current.attempt_id
                             for a in cluster.attempts(job_id)), 300, interval=0.05, message="a new attempt RUNNING")
        sample["running"] = time.time() - killed
        if until == "committing":
            # The killed driver may have completed a checkpoint in its last instant: wait for one
            # that the new attempt made.
            wait_for(lambda: _last_checkpoint(cluster, job_id) > before and any(
                c["attemptId"] > current.attempt_id for c in _checkpoints(cluster, job_id)), 300, interval=0.05,
                message="a checkpoint of the new attempt")
            sample["committing"] = time.time() - killed
        samples.append(sample)
    return samples


def _checkpoints(cluster: Cluster, job_id: str) -> list[dict]:
    from sqlalchemy import select

    from seatide.store import schema as s
    with cluster.store.read() as conn:
        return [{"attemptId": row.attempt_id} for row in conn.execute(
            select(s.checkpoints.c.attempt_id).where(s.checkpoints.c.job_id == job_id))]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def plot(results: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [(f"leader\n{store}", results["leader"][store]) for store in results["leader"]]
    for store, modes in results["worker"].items():
        for key in ("assigned", "running", "committing"):
            if all(key in s for samples in modes.values() for s in samples):
                rows.append((f"worker {store}\n{key}", {mode: [s[key] for s in samples]
                                                        for mode, samples in modes.items()}))
    fig, ax = plt.subplots(figsize=(2.2 * len(rows) + 2, 4))
    modes = [m for m in LABELS if any(m in r[1] for r in rows)]
    colors = ["#b0b0b0", "#2a7ab9", "#e08a2c", "#4a9a4a"]
    width = 0.8 / len(modes)
    for index, mode in enumerate(modes):
        offset = (index - (len(modes) - 1) / 2) * width
        medians = [statistics.median(r[1][mode]) if r[1].get(mode) else 0 for r in rows]
        ax.bar([i + offset for i in range(len(rows))], medians, width, label=LABELS[mode], color=colors[index])
        for i, r in enumerate(rows):
            ax.scatter([i + offset] * len(r[1].get(mode, [])), r[1].get(mode, []), s=10, color="black", zorder=3)
    ax.set_xticks(range(len(rows)), [r[0] for r in rows])
    ax.set_ylabel("seconds from SIGKILL (median, dots: samples)")
    ax.set_title("SIGKILL -> new leader serving / replacement attempt assigned, running, committing")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--leader-kills", type=int, default=5)
    parser.add_argument("--worker-kills", type=int, default=3)
    parser.add_argument("--worker-stores", default="postgresql", help="stores for the worker runs ('' to skip)")
    parser.add_argument("--out", help="path without .json/.png (default: results/failover, or results/"
                                      "failover_warm for --worker-compare warm: docs/benchmarks.md shows both)")
    parser.add_argument("--worker-until", choices=["committing", "running"], default="committing",
                        help="running: stop each worker sample once the new attempt runs (no checkpoint wait)")
    parser.add_argument("--warm-drivers", type=int, default=0,
                        help="each worker's warm pool in the worker runs (default 0: cold drivers)")
    parser.add_argument("--worker-compare", choices=["locks", "warm"], default="locks",
                        help="worker runs: liveness locks vs none (cold drivers), or cold vs warm drivers (locks)")
    parser.add_argument("--plot-only", metavar="JSON", help="draw the plot of an earlier run's JSON, and stop")
    args = parser.parse_args()
    if args.out is None:       # one file per kind of run: a warm comparison never replaces the leader plot
        name = "failover_warm" if args.worker_compare == "warm" else "failover"
        args.out = os.path.join(os.path.dirname(__file__), "results", name)
    if args.plot_only:
        with open(args.plot_only) as handle:
            out = args.plot_only.removesuffix(".json") + ".png"
            print(f"wrote {out}" if plot(json.load(handle), out) else "matplotlib is not installed")
        return
    results: dict = {"leader": {}, "worker": {}, "settings": {
        "lease_ttl_s": 2.0, "lease_renew_s": 0.5, "worker_lost_after_s": 5.0,   # the harness's
        "checkpoint_interval_ms": 1000, "retry_interval_s": 1.0, "cores": os.cpu_count(),
        "load_average_at_start": os.getloadavg()[0]}}
    for store in [s for s in args.stores.split(",") if s]:
        results["leader"][store] = {}
        for mode, env in MODES.items():
            with tempfile.TemporaryDirectory(prefix="seatide-bench-") as tmp:
                cluster, drop = _cluster(store, tmp, env)
                try:
                    samples = leader_failover(cluster, args.leader_kills)
                finally:
                    cluster.stop_all()
                    drop()
            results["leader"][store][mode] = [round(x, 3) for x in samples]
            print(f"leader SIGKILL -> new leader serving ({store}, {mode}): median {_median(samples):.2f} s "
                  f"of {len(samples)}, samples {results['leader'][store][mode]}", flush=True)
    for store in [s for s in args.worker_stores.split(",") if s]:
        results["worker"][store] = {}
        worker_modes = ({mode: (env, args.warm_drivers) for mode, env in MODES.items()}
                        if args.worker_compare == "locks" else
                        {mode: (MODES["after"], warm) for mode, warm in WARM_MODES.items()})
        for mode, (env, warm_drivers) in worker_modes.items():
            with tempfile.TemporaryDirectory(prefix="seatide-bench-") as tmp:
                cluster, drop = _cluster(store, tmp, env, warm_drivers)
                try:
                    samples = worker_loss(cluster, tmp, args.worker_kills, args.worker_until)
                finally:
                    cluster.stop_all()
                    drop()
            results["worker"][store][mode] = [{k: round(v, 3) for k, v in s.items()} for s in samples]
            medians = {key: _median([s[key] for s in samples]) for key in samples[0]}
            print(f"worker SIGKILL -> replacement ({store}, {mode}): medians {medians}, "
                  f"samples {results['worker'][store][mode]}", flush=True)
    summary = {}
    for store, modes in results["leader"].items():
        summary[f"leader_{store}"] = {m: _median(v) for m, v in modes.items()}
    for store, modes in results["worker"].items():
        key = "committing" if args.worker_until == "committing" else "running"
        summary[f"worker_{store}_{key}"] = {m: _median([s[key] for s in v]) for m, v in modes.items()}
        summary[f"worker_{store}_assigned"] = {m: _median([s["assigned"] for s in v]) for m, v in modes.items()}
    for key, value in summary.items():
        if value.get("before") and value.get("after") is not None:
            value["ratio_after_before"] = round(value["after"] / value["before"], 3)
        if value.get("cold") and value.get("warm") is not None:
            value["ratio_warm_cold"] = round(value["warm"] / value["cold"], 3)
    results["summary"] = summary
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump(results, handle, indent=2)
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out}.json" + (f" and {args.out}.png" if plot(results, args.out + ".png")
                                      else " (no plot: matplotlib is not installed; pip install -e .[bench])"))


if __name__ == "__main__":
    main()
