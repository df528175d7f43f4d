"""Failover numbers: leader SIGKILL -> new leader serving /overview; worker SIGKILL -> job running again.

    .venv/bin/python bench/failover.py [--store sqlite|postgresql] [--kills 10]

Leader: the median and max seconds from SIGKILL of the leader to a surviving
coordinator answering /api/v1/overview with a higher epoch (lease TTL 2 s, renew 0.5 s).
Worker: seconds from SIGKILL of the worker running a streaming job to the job's next
attempt RUNNING on the other worker, and to its first new checkpoint.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sqlalchemy import create_engine, text  # noqa: E402

from tests.cluster.harness import Cluster, http, wait_for  # noqa: E402
from tests.cluster.jobs import streaming_job  # noqa: E402


def store_url(kind: str, tmp: str) -> tuple[str, callable]:
    if kind == "sqlite":
        return f"sqlite:///{tmp}/state.db", lambda: None
    name = f"seatide_bench_{secrets.token_hex(3)}"
    admin = create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))

    def drop():
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    return f"postgresql://postgres@127.0.0.1:5432/{name}", drop


def leader_failover(cluster: Cluster, kills: int) -> list[float]:
    cluster.coordinator("c0")
    samples = []
    for i in range(1, kills + 1):
        cluster.coordinator(f"c{i}")
        lease = wait_for(lambda: (lambda l: l if l.node_id else None)(cluster.leader()), 10)
        victim = cluster.leader_proc()
        survivors = [p for p in cluster.procs if p.url and p.alive and p is not victim]
        victim.kill()
        killed = time.time()
        wait_for(lambda: any((http("GET", p.url + "/api/v1/overview", timeout=1)[1]["leader"] or {})
                             .get("epoch", 0) > lease.epoch for p in survivors), 20, interval=0.02,
                 message="a new leader")
        samples.append(time.time() - killed)
    return samples


def worker_loss(cluster: Cluster, tmp: str) -> tuple[float, float]:
    cluster.worker("w1")
    cluster.submit(streaming_job(f"{tmp}/out", interval_ms=1000), "bench-worker-loss")
    cluster.wait_status("bench-worker-loss", "RUNNING", timeout=120)
    wait_for(lambda: (cluster.job_info("bench-worker-loss")["checkpoint"]["lastCheckpointId"] or 0) >= 2, 120)
    cluster.worker("w2")
    first = cluster.attempts("bench-worker-loss")[0]
    victim = next(p for p in cluster.procs if p.name == first.worker_id)
    victim.kill()
    killed = time.time()
    wait_for(lambda: any(a.state == "RUNNING" and a.attempt_id != first.attempt_id
                         for a in cluster.attempts("bench-worker-loss")), 120, interval=0.1)
    running = time.time() - killed
    before = cluster.job_info("bench-worker-loss")["checkpoint"]["lastCheckpointId"]
    wait_for(lambda: (cluster.job_info("bench-worker-loss")["checkpoint"]["lastCheckpointId"] or 0) > before,
             120, interval=0.1)
    return running, time.time() - killed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--skip-worker", action="store_true")
    parser.add_argument("--warm-drivers", type=int, default=0, help="each worker's warm pool (default 0: cold)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, drop = store_url(args.store, tmp)
        cluster = Cluster(url, f"{tmp}/data", warm_drivers=args.warm_drivers)   # the fault tests' timeouts
        try:
            samples = leader_failover(cluster, args.kills)
            print(f"leader failover ({args.store}, {len(samples)} kills): median {statistics.median(samples):.2f} s, "
                  f"max {max(samples):.2f} s  samples={[round(x, 2) for x in samples]}")
            if not args.skip_worker:
                running, checkpoint = worker_loss(cluster, tmp)
                print(f"worker loss ({args.store}, worker heartbeat timeout {cluster.timeouts['worker']:g} s): "
                      f"job running again after {running:.1f} s, first new checkpoint after {checkpoint:.1f} s")
        finally:
            cluster.stop_all()
            drop()


if __name__ == "__main__":
    main()
