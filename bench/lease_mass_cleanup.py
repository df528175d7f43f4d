"""Does the leader keep its lease through a pass of a thousand cleanups? Before/after, one run.

    .venv/bin/python bench/lease_mass_cleanup.py --before-src /tmp/before/src [--jobs 1000]
                                                 [--stores postgresql,sqlite] [--rounds 2]

N jobs are submitted with ``state-cleanup-delay`` 0 and cancelled before any worker exists, then
one real coordinator (its own thread and reconcile loop, as in ``seatide cluster coordinator``)
ends them all and cleans each one up: N cleanup steps due in the same pass. For each version,
on a fresh store of its own, in a fresh process, alternating: how many times the leader lost
its lease (LEADER_ELECTED events after the first: with no other coordinator each loss is a
re-election by the same one), and how long until every result was CLEAN. Writes
``bench/results/lease_mass_cleanup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = """
env { job.mode = BATCH }
source { FakeSource { row.num = 3, schema = { fields { id = bigint } } } }
sink { Console {} }
"""


def measure(url: str, jobs: int, data_dir: str) -> dict:
    import logging

    from sqlalchemy import func, select

    from seatide import intents
    from seatide.coordinator.service import Coordinator
    from seatide.store import schema as s
    from seatide.store.db import open_store

    logging.disable(logging.WARNING)
    store = open_store(url)
    for i in range(jobs):
        job_id = intents.submit(store, data_dir, text=JOB, job_id=f"mass-{i}", actor="bench",
                                cleanup_delay_s=0).job_id
        intents.stop(store, job_id, actor="bench")

    def count(query) -> int:
        with store.read() as conn:
            return conn.execute(query).scalar()

    clean = select(func.count()).select_from(s.job_results).where(s.job_results.c.cleanup == "CLEAN")
    elected = select(func.count()).select_from(s.events).where(s.events.c.kind == "LEADER_ELECTED")
    load = os.getloadavg()[0]
    coordinator = Coordinator(store, node_id="c-mass", data_dir=data_dir)
    began = time.monotonic()
    coordinator.start()
    try:
        deadline = began + 900
        while count(clean) < jobs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {count(clean)} of {jobs} cleaned up in 900 s")
            time.sleep(0.2)
        took = time.monotonic() - began
    finally:
        coordinator.stop()
    losses = count(elected) - 1
    store.dispose()
    return {"lease_losses": losses, "all_clean_s": round(took, 1), "load_avg_1m": [round(load, 1),
                                                                                    round(os.getloadavg()[0], 1)]}


def _child(src: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-src", help="the baseline's src directory (e.g. from git archive)")
    parser.add_argument("--after-src", default=os.path.join(ROOT, "src"))
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--stores", default="postgresql,sqlite")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "lease_mass_cleanup.json"))
    parser.add_argument("--measure", nargs=3, metavar=("URL", "JOBS", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        url, jobs, data_dir = args.measure
        print(json.dumps(measure(url, int(jobs), data_dir)))
        return 0
    if not args.before_src:
        parser.error("--before-src is required")
    sys.path.insert(0, os.path.abspath(args.after_src))
    from seatide.testing.stores import scratch_store

    versions = {"before": os.path.abspath(args.before_src), "after": os.path.abspath(args.after_src)}
    results = []
    for kind in args.stores.split(","):
        point = {"store": kind, "jobs": args.jobs, **{name: [] for name in versions}}
        for _ in range(args.rounds):
            for name, src in versions.items():
                tmp = tempfile.mkdtemp(prefix=f"mass-{kind}-{name}-")
                url, drop = scratch_store(kind, tmp, f"mass_{name}")
                try:
                    point[name].append(_child(src, "--measure", url, str(args.jobs), tmp))
                finally:
                    drop()
                print(kind, name, point[name][-1], flush=True)
        results.append(point)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump({"rounds": args.rounds, "results": results}, handle, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
