"""Control-plane cost against the number of concurrent jobs (issue 10, "a thousand jobs").

    .venv/bin/python bench/control_plane_scale.py [--jobs 100,1000,5000] [--stores sqlite,postgresql]
                                                  [--quick] [--seconds 60] [--out bench/results]

For each store and job count: N STREAMING jobs (checkpoint every 1 s, ``checkpoint.retained``
10 so retention reaches its steady state within the run) are submitted and run by a fleet
of simulated drivers (``seatide.testing.fleet``, in its own process: four real workers,
drivers that report through the real reporter and heartbeat). A real coordinator (leader,
reconcile loop, retention pruning every 10 s) and the REST app run in this process, as in
``seatide cluster coordinator``. Once every job runs, for ``--seconds``:

* every reconcile pass of the first half is timed (the ``seatide_reconcile_tick_seconds`` hook), with no
  API calls (they share the coordinator's process): p50, p99, max; and, as the same run's baseline,
  20 passes of a leader with no jobs (``idle_tick``), with the load average;
* in the second half ``GET /api/v1/running-jobs`` and ``GET /api/v1/job-info/{id}`` are called in turn, in-process
  through the real ASGI app: p50, p99;
* the store's used bytes and rows are read at both ends: growth per hour of streaming, scaled
  from the checkpoint rate the fleet reached to the 1 s per job the jobs ask for.

Writes ``control_plane_scale.json`` and, with matplotlib installed (``pip install -e .[bench]``),
``control_plane_scale.png`` (cost against job count, one line per store and measure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from sqlalchemy import func, select, text  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WORKERS = 4


def _die_with_parent() -> None:
    import ctypes
    import signal
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG: no fleet outlives the bench


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary_ms(samples: list[float]) -> dict:
    ms = [x * 1000 for x in samples]
    return {"n": len(ms), "p50_ms": _r(percentile(ms, 0.5)), "p99_ms": _r(percentile(ms, 0.99)),
            "max_ms": _r(max(ms) if ms else None), "mean_ms": _r(statistics.fmean(ms) if ms else None)}


def _r(x):
    return None if x is None else round(x, 2)


# -- stores --------------------------------------------------------------------------------
def make_store(kind: str, tmp: str):
    from seatide.testing.stores import scratch_store

    return scratch_store(kind, tmp, "scale_bench")


def used_bytes(store) -> int:
    """Bytes the store's data takes (SQLite: pages in use, free pages excluded; PostgreSQL: the
    database's tables and indexes, dead rows included until autovacuum reclaims them)."""
    with store.engine.connect() as conn:
        if store.is_sqlite:
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
            free = conn.exec_driver_sql("PRAGMA freelist_count").scalar()
            size = conn.exec_driver_sql("PRAGMA page_size").scalar()
            return int((pages - free) * size)
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar())


def row_counts(store) -> dict:
    from seatide.store import schema as s

    with store.read() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar()
                for t in (s.checkpoints, s.events, s.attempts, s.pipelines)}


def read_stats(path: str) -> dict:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


# -- one measurement -----------------------------------------------------------------------
def idle_tick_ms(store, passes: int = 20) -> dict:
    """The same run's baseline: reconcile passes of a leader with no jobs (store round trips and
    the machine's load, nothing that grows with jobs)."""
    from seatide.coordinator.service import Coordinator

    leader = Coordinator(store, node_id="c-baseline")
    samples = []
    if leader.lease.tick():
        for _ in range(passes):
            began = time.perf_counter()
            leader.reconcile_all()
            samples.append(time.perf_counter() - began)
        leader.lease.resign()
    return summary_ms(samples)


def bench_timeouts(heartbeat: float):
    """The default timeouts with every driver and worker interval scaled by ``heartbeat`` (s)."""
    from seatide.timeouts import Timeouts

    # launch: a ramp of thousands of attempts on a loaded 2-core box takes minutes; the
    # benchmark measures the steady state, so a slow start is waited for, not replaced.
    return Timeouts(driver_heartbeat_interval=heartbeat, driver_self_fence_after=6 * heartbeat,
                    driver_hung_after=10 * heartbeat, worker_heartbeat_interval=heartbeat,
                    worker_lost_after=10 * heartbeat, launch=900.0).check()


def measure(kind: str, jobs: int, seconds: float, profile: str | None, heartbeat: float = 1.0,
            ramp_timeout: float | None = None) -> dict:
    from fastapi.testclient import TestClient

    from seatide.api.rest import create_app
    from seatide.coordinator.retention import RetentionRules
    from seatide.coordinator.service import Coordinator
    from seatide.store import schema as s
    from seatide.store.db import Store, open_store
    from seatide.testing.fleet import submit_fleet_jobs

    timeouts = bench_timeouts(heartbeat)
    tmp = tempfile.mkdtemp(prefix=f"scale-{kind}-{jobs}-")
    url, drop = make_store(kind, tmp)
    store = open_store(url)
    fleet = None
    coordinator = None
    readers = None
    try:
        idle_tick = idle_tick_ms(store)
        began = time.monotonic()
        ids = submit_fleet_jobs(store, tmp, jobs, streaming=True, interval_ms=1000, retained=10, prefix="scale")
        submit_s = time.monotonic() - began
        stats_path = os.path.join(tmp, "fleet.json")
        env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
        fleet = subprocess.Popen([sys.executable, "-m", "seatide.testing.fleet", "--store", url, "--data-dir", tmp,
                                  "--workers", str(WORKERS), "--slots", str(jobs // WORKERS + 1),
                                  "--stats-file", stats_path, "--timeouts", json.dumps(asdict(timeouts))], env=env,
                                 preexec_fn=_die_with_parent)
        coordinator = Coordinator(store, node_id="c-bench", data_dir=tmp, timeouts=timeouts,
                                  retention=RetentionRules(every_s=10.0))
        ticks: list[float] = []
        coordinator.observe_tick = ticks.append
        coordinator.start()
        readers = Store(store.url)      # as `seatide cluster coordinator` wires it: the API's own pool
        client = TestClient(create_app(readers, tmp, coordinator.node_id))

        def running() -> int:
            with store.read() as conn:
                return conn.execute(select(func.count()).select_from(s.jobs)
                                    .where(s.jobs.c.status == "RUNNING")).scalar()

        deadline = time.monotonic() + (120 + jobs * 0.5 if ramp_timeout is None else ramp_timeout)
        while running() < jobs:
            if time.monotonic() > deadline or fleet.poll() is not None:
                # The leader's lease losses still count: an overloaded ramp is where they happen.
                return {"store": kind, "jobs": jobs, "driver_heartbeat_s": heartbeat,
                        "error": f"only {running()} of {jobs} jobs running before the deadline",
                        "load_avg_1m": round(os.getloadavg()[0], 1),
                        "lease_losses": lease_losses(list(coordinator.lease.losses), coordinator.lease.losses_total,
                                                     coordinator.lease.widest_gap)}
            time.sleep(0.5)
        all_running_s = time.monotonic() - began - submit_s
        # Let every job pass its retention (10 batches) so pruning is in its steady state.
        time.sleep(min(15.0, seconds / 2))
        ticks.clear()
        size0, rows0, stats0, t0 = used_bytes(store), row_counts(store), read_stats(stats_path), time.monotonic()
        load0 = os.getloadavg()[0]
        profiler = _start_profile(profile)
        # First half: reconcile passes alone (the API shares the coordinator's process and GIL:
        # hammering it would time the API, not the tick). Second half: the API.
        time.sleep(seconds / 2)
        tick_samples = list(ticks)
        running_lat, info_lat = [], []
        rng = random.Random(7)
        end = t0 + seconds
        while time.monotonic() < end:
            began = time.perf_counter()
            response = client.get("/api/v1/running-jobs")
            running_lat.append(time.perf_counter() - began)
            assert response.status_code == 200 and len(response.json()) == jobs, response.status_code
            for _ in range(5):
                job_id = rng.choice(ids)
                began = time.perf_counter()
                response = client.get(f"/api/v1/job-info/{job_id}")
                info_lat.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text
            time.sleep(0.05)
        _stop_profile(profiler, profile, f"{kind}-{jobs}")
        elapsed = time.monotonic() - t0
        losses = list(coordinator.lease.losses)
        size1, rows1, stats1 = used_bytes(store), row_counts(store), read_stats(stats_path)
        batches = stats1.get("batches", 0) - stats0.get("batches", 0)
        rate = batches / elapsed / jobs          # checkpoints per second per job actually reached
        scale = (1.0 / rate) if rate > 0 else float("nan")   # to the 1 s per job asked for
        return {
            "store": kind, "jobs": jobs, "seconds": round(elapsed, 1), "driver_heartbeat_s": heartbeat,
            "load_avg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "idle_tick": idle_tick,
            "submit_s": round(submit_s, 1), "all_running_s": round(all_running_s, 1),
            "tick": summary_ms(tick_samples),
            "lease_losses": lease_losses(losses, coordinator.lease.losses_total, coordinator.lease.widest_gap),
            "running_jobs": summary_ms(running_lat), "job_info": summary_ms(info_lat),
            "checkpoints_per_job_per_s": round(rate, 3),
            "heartbeat_lag_max_s": round(stats1.get("heartbeat_lag_max_s", 0.0), 2),
            "fleet": {k: stats1.get(k) for k in ("started", "batches", "heartbeats", "fenced", "errors")},
            "store_bytes": {"start": size0, "end": size1,
                            "growth_per_hour_measured": round((size1 - size0) / elapsed * 3600),
                            "growth_per_hour_at_1s": round((size1 - size0) / elapsed * 3600 * scale)},
            "rows": {"start": rows0, "end": rows1,
                     "growth_per_hour_at_1s": {k: round((rows1[k] - rows0[k]) / elapsed * 3600 * scale)
                                               for k in rows0}},
        }
    finally:
        if fleet is not None and fleet.poll() is None:
            fleet.terminate()
            try:
                fleet.wait(timeout=30)
            except subprocess.TimeoutExpired:
                fleet.kill()
                fleet.wait()
        if coordinator is not None:
            coordinator.stop()
        if readers is not None:
            readers.dispose()
        store.dispose()
        drop()


def lease_losses(losses: list, total: int, widest_gap: tuple) -> dict:
    """The leader's lease losses over the whole run (ramp included): how many, and why; and the
    widest gap between two renewals that landed (how close to the ttl it came)."""
    causes: dict[str, int] = {}
    for loss in losses:
        key = f"{loss.why}; slowest step since the last renewal: {loss.slowest_step or 'none'}"
        causes[key] = causes.get(key, 0) + 1
    return {"total": total, "by_cause": causes,
            "max_since_renewal_s": max((loss.since_renewal_s for loss in losses), default=None),
            "widest_renewal_gap_s": widest_gap[0], "slowest_step_in_it": f"{widest_gap[1]} ({widest_gap[2]} s)"}


def _start_profile(kind: str | None):
    if kind is None:
        return None
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def _stop_profile(profiler, kind: str | None, name: str) -> None:
    if profiler is None:
        return
    import pstats
    profiler.disable()
    print(f"--- profile {name} (cumulative, top 30) ---", file=sys.stderr)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)


# -- output --------------------------------------------------------------------------------
def plot(results: list[dict], path: str) -> bool:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install -e .[bench]): no PNG written", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, (key, title) in zip(axes, [("tick", "reconcile tick"), ("running_jobs", "GET running-jobs"),
                                       ("job_info", "GET job-info/{id}")]):
        for kind in sorted({r["store"] for r in results}):
            rows = sorted((r for r in results if r["store"] == kind), key=lambda r: r["jobs"])
            xs = [r["jobs"] for r in rows]
            for q, style in (("p50_ms", "o--"), ("p99_ms", "o-")):
                ax.plot(xs, [r[key][q] for r in rows], style, label=f"{kind} {q[:3]}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("concurrent jobs")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("SeaTide control plane: cost against job count")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="100,1000", help="comma-separated job counts (e.g. 100,1000,5000)")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured period per point")
    parser.add_argument("--quick", action="store_true", help="15 s per point, 100 jobs unless --jobs is given")
    parser.add_argument("--profile", action="store_true", help="cProfile the measured period (stderr)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    parser.add_argument("--heartbeat", type=float, default=1.0,
                        help="driver and worker heartbeat interval, s (timeouts scale with it; default 1 as shipped)")
    parser.add_argument("--ramp-timeout", type=float,
                        help="seconds for every job to reach RUNNING (default 120 + 0.5 per job); past it the "
                             "point records an error and the leader's lease losses so far")
    args = parser.parse_args()
    counts = [int(x) for x in args.jobs.split(",")]
    if args.quick:
        args.seconds = min(args.seconds, 15.0)
        if "--jobs" not in sys.argv:
            counts = [100]
    import logging
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("seatide").setLevel(logging.WARNING)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for kind in args.stores.split(","):
        for jobs in counts:
            print(f"== {kind}, {jobs} jobs ==", flush=True)
            try:
                result = measure(kind, jobs, args.seconds, "cprofile" if args.profile else None, args.heartbeat,
                                 args.ramp_timeout)
            except Exception as exc:
                print(f"   failed: {type(exc).__name__}: {exc}", flush=True)
                results.append({"store": kind, "jobs": jobs, "error": f"{type(exc).__name__}: {exc}"})
                continue
            results.append(result)
            if "error" in result:
                print(f"   failed: {result['error']}; lease losses {result['lease_losses']}", flush=True)
                continue
            print(f"   lease losses {result['lease_losses']}", flush=True)
            print(f"   load {result['load_avg_1m']}, idle tick p50 {result['idle_tick']['p50_ms']} ms, "
                  f"tick p50/p99 {result['tick']['p50_ms']}/{result['tick']['p99_ms']} ms, "
                  f"running-jobs {result['running_jobs']['p50_ms']}/{result['running_jobs']['p99_ms']} ms, "
                  f"job-info {result['job_info']['p50_ms']}/{result['job_info']['p99_ms']} ms, "
                  f"{result['checkpoints_per_job_per_s']} ckpt/job/s, "
                  f"growth {result['store_bytes']['growth_per_hour_at_1s'] / 1e6:.1f} MB/h at 1 s", flush=True)
    payload = {"machine": {"cores": os.cpu_count()}, "seconds": args.seconds, "results": results}
    json_path = os.path.join(args.out, "control_plane_scale.json")
    with open(json_path, "w") as handle:
        json.dump(payload, handle, indent=2)
    print(f"wrote {json_path}")
    ok = [r for r in results if "error" not in r]
    if ok and plot(ok, os.path.join(args.out, "control_plane_scale.png")):
        print(f"wrote {os.path.join(args.out, 'control_plane_scale.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
