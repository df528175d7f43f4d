"""Before/after of the control plane's reads on the same state, alternating in one run.

    .venv/bin/python bench/control_plane_reads.py --before-src /tmp/before/src [--jobs 100,1000]
                                                  [--stores sqlite,postgresql] [--rounds 3]

``control_plane_scale.py`` measures a live fleet; on a loaded 2-core machine its numbers
move with the load. This one compares two versions of the code on identical stores: for each
store and job count it builds one store per version (each migrated by its own code), fills
both alike (N RUNNING jobs, one RUNNING pipeline and attempt each, ``--checkpoints`` checkpoint
rows per job, a live worker), then runs each version's measurement in turn, ``--rounds``
times, in fresh processes: 10 reconcile passes of a leader whose timeouts are far off (it
decides nothing, it reads), 3 ``GET /api/v1/running-jobs`` and 20 ``GET /api/v1/job-info/{id}``
through the real app. Reports medians over rounds of each p50/p99 and the ratio before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FAR = 1e7   # seconds: no timeout fires while measuring


def _pct(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))] * 1000


def populate(url: str, jobs: int, checkpoints: int, data_dir: str) -> None:
    from sqlalchemy import insert, update

    from seatide.coordinator.service import register_node
    from seatide.store import schema as s
    from seatide.store.db import open_store
    from seatide.testing.fleet import submit_fleet_jobs

    store = open_store(url)
    ids = submit_fleet_jobs(store, data_dir, jobs, retained=checkpoints, prefix="reads")
    register_node(store, "w-reads", "worker", slots=jobs + 1)
    now = time.time()
    # Rows are built outside the transactions: PostgreSQL ends a session idle in one for 5 s.
    rows = [dict(job_id=j, incarnation=1, number=1, worker_id="w-reads", state="RUNNING", pid=1, created_at=now,
                 launched_at=now, heartbeat_at=now, kill_requested=False) for j in ids]
    with store.write() as conn:
        conn.execute(insert(s.attempts), rows)
        attempts = dict(conn.execute(s.attempts.select().with_only_columns(s.attempts.c.job_id,
                                                                            s.attempts.c.attempt_id)).all())
        for j in ids:
            conn.execute(update(s.jobs).where(s.jobs.c.job_id == j).values(status="RUNNING",
                                                                           current_attempt=attempts[j]))
        conn.execute(update(s.pipelines).values(status="RUNNING", started_at=now, rows_read=10 * checkpoints,
                                                rows_written=10 * checkpoints, last_batch_id=checkpoints - 1))
    for chunk in range(0, len(ids), 100):
        rows = [dict(job_id=j, incarnation=1, checkpoint_id=b + 1, pipeline_id=0, batch_id=b, kind="CHECKPOINT",
                     status="COMPLETED", created_at=now - checkpoints + b, duration_ms=5, rows=10,
                     source_offsets='{"batch": %d}' % b, fingerprint="fp", attempt_id=attempts[j])
                for j in ids[chunk:chunk + 100] for b in range(checkpoints)]
        with store.write() as conn:
            conn.execute(insert(s.checkpoints), rows)
    if "checkpoints_completed" in s.pipelines.c:      # the totals a driver's commits keep (revision 0008)
        with store.write() as conn:
            conn.execute(update(s.pipelines).values(checkpoints_completed=checkpoints, last_checkpoint_id=checkpoints,
                                                    last_checkpoint_at=now - 1))
    store.dispose()


def measure(url: str, data_dir: str) -> dict:
    import logging
    import random

    logging.disable(logging.WARNING)
    from fastapi.testclient import TestClient

    import gc

    from seatide.api.rest import create_app
    from seatide.cli import cluster
    from seatide.coordinator.service import Coordinator, register_node
    from seatide.store.db import open_store
    from seatide.timeouts import Timeouts

    store = open_store(url)
    register_node(store, "w-reads", "worker", slots=100000)
    far = Timeouts(driver_self_fence_after=FAR / 4, driver_hung_after=FAR, worker_lost_after=FAR, launch=FAR,
                   lease_ttl=60.0, lease_renew=10.0)
    leader = Coordinator(store, node_id="c-reads", timeouts=far)
    deadline = time.time() + 120
    while not leader.lease.tick():
        if time.time() > deadline:
            raise RuntimeError("no lease")
        time.sleep(0.5)
    leader.reconcile_all()          # warm: first pass prunes, caches fill
    ticks = []
    for _ in range(10):
        began = time.perf_counter()
        leader.reconcile_all()
        ticks.append(time.perf_counter() - began)
    leader.lease.resign()
    client = TestClient(create_app(store, data_dir, "c-reads"))
    if "gc.freeze" in open(cluster.__file__).read():
        gc.freeze()     # as the coordinator's process does once it is up (cli/cluster.py)
    running = []
    for _ in range(3):
        began = time.perf_counter()
        response = client.get("/api/v1/running-jobs")
        running.append(time.perf_counter() - began)
        assert response.status_code == 200
    ids = [row["jobId"] for row in response.json()]
    # The first job-info imports the config reader (200 ms); a coordinator's start-up warm-up
    # (plan/warm_up.py) has done that before its first request.
    assert client.get(f"/api/v1/job-info/{ids[0]}").status_code == 200
    rng = random.Random(3)
    info = []
    for _ in range(20):
        job_id = rng.choice(ids)
        began = time.perf_counter()
        assert client.get(f"/api/v1/job-info/{job_id}").status_code == 200
        info.append(time.perf_counter() - began)
    store.dispose()
    return {"jobs_listed": len(ids), **{f"{name}_{q}": round(_pct(xs, p), 2) for name, xs in
                                        (("tick", ticks), ("running_jobs", running), ("job_info", info))
                                        for q, p in (("p50", 0.5), ("p99", 0.99))}}


def _make_store(kind: str, tmp: str, tag: str):
    from seatide.testing.stores import scratch_store

    return scratch_store(kind, tmp, f"scale_reads_{tag}")


def _child(src: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-src", help="the baseline's src directory (e.g. from git archive)")
    parser.add_argument("--after-src", default=os.path.join(ROOT, "src"))
    parser.add_argument("--jobs", default="100,1000")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--checkpoints", type=int, default=100, help="checkpoint rows per job (checkpoint.retained)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "control_plane_reads.json"))
    parser.add_argument("--populate", nargs=3, metavar=("URL", "JOBS", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=2, metavar=("URL", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.populate:
        url, jobs, data_dir = args.populate
        populate(url, int(jobs), args.checkpoints, data_dir)
        return 0
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    if not args.before_src:
        parser.error("--before-src is required")
    versions = {"before": os.path.abspath(args.before_src), "after": os.path.abspath(args.after_src)}
    results = []
    for kind in args.stores.split(","):
        for jobs in [int(x) for x in args.jobs.split(",")]:
            tmp = tempfile.mkdtemp(prefix=f"reads-{kind}-{jobs}-")
            stores = {name: _make_store(kind, tmp, name) for name in versions}
            try:
                for name, src in versions.items():
                    _child(src, "--populate", stores[name][0], str(jobs), tmp, "--checkpoints", str(args.checkpoints))
                runs = {name: [] for name in versions}
                for _ in range(args.rounds):
                    for name, src in versions.items():
                        runs[name].append(json.loads(_child(src, "--measure", stores[name][0], tmp)))
                point = {"store": kind, "jobs": jobs, "checkpoints_per_job": args.checkpoints,
                         "load_avg_1m": round(os.getloadavg()[0], 1)}
                for name in versions:
                    keys = [k for k in runs[name][0] if k != "jobs_listed"]
                    point[name] = {k: round(statistics.median(r[k] for r in runs[name]), 2) for k in keys}
                point["before_over_after"] = {k: round(point["before"][k] / point["after"][k], 1)
                                              for k in point["after"] if point["after"][k]}
                results.append(point)
                print(json.dumps(point), flush=True)
            finally:
                for _, drop in stores.values():
                    drop()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump({"rounds": args.rounds, "results": results}, handle, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
