"""CDC upserts into Iceberg: end-to-end latency and snapshots per hour, with and without maintenance.

    .venv/bin/python bench/iceberg_cdc.py [--rate 1000] [--seconds 120] [--rows 50000]
    .venv/bin/python bench/iceberg_cdc.py --modes cow,mor [--rounds 1] [--seconds 60]

A private PostgreSQL (wal_level = logical) holds ``items(id, v)`` with ``--rows`` rows. A writer
commits ``--rate`` changes per second in transactions of 50: 80% updates of random rows (each sets
``v`` to a new, globally unique number), 10% inserts, 10% deletes. A Postgres-CDC source streams
them, as a STREAMING job with ``checkpoint.interval = 1000`` reads it, into the Iceberg sink
(hadoop catalog, primary key ``id``, upsert: copy-on-write) through the runtime's exactly-once
path (``write_exactly_once``), one SparkSession.

Latency of a change = the commit time of the Iceberg snapshot that first holds its ``v`` minus the
time its source COMMIT returned (inserts and updates; a monitor reads each new snapshot's added
files as it appears). Two runs, each on a fresh table: without maintenance, and with
``expire-snapshots-older-than-ms = 60000, retain-last = 20, rewrite-every-commits = 30``.
Prints p50/p99 latency, snapshots committed per hour, what the table holds at the end (snapshots,
data files, metadata files); writes bench/results/iceberg_cdc.json and .png.

``--modes cow,mor`` instead runs the same workload without maintenance once per mode and round,
alternating: copy-on-write (the default) and merge-on-read (``write.upsert.mode =
merge-on-read``: new rows and equality deletes). Beside the latency and snapshots it reports the
data and delete files on disk and live, the read cost of the resulting table (SeaTide's Iceberg
source reading it back whole, best of three) and whether it equals the source table, and for
merge-on-read the same read after SeaTide's compaction (``read_ratio``: the goal is <= 1.5);
``--rewrite-every N`` sets ``iceberg.maintenance.rewrite-every-commits`` on every case. Each case
also records the median of Spark's progress durations over the batches that moved rows; writes
bench/results/iceberg_cdc_modes.json and .png.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "connectors"))
sys.path.insert(0, os.path.dirname(__file__))

from cdc_servers import PrivatePostgres  # noqa: E402
from side_by_side import pyplot, write_results  # noqa: E402

from seatide.config.loader import load_job_text  # noqa: E402
from seatide.connectors.iceberg.catalogs import load_catalog  # noqa: E402
from seatide.connectors.iceberg.sink import IcebergSink  # noqa: E402
from seatide.plugin.base import ReadContext, SinkContext  # noqa: E402
from seatide.plugin.options import read_options  # noqa: E402
from seatide.plugin.sink_protocol import open_sink  # noqa: E402
from seatide.runtime.commit_log import SinkCommitLog, write_exactly_once  # noqa: E402
from seatide.runtime.session import build_session  # noqa: E402

PER_COMMIT = 50
MAINTENANCE = {"iceberg.maintenance.expire-snapshots-older-than-ms": 60_000, "iceberg.maintenance.retain-last": 20,
               "iceberg.maintenance.rewrite-every-commits": 30}


class Changes:
    """The writer: ``rate`` changes per second; commit time of every (id, v) it wrote."""

    def __init__(self, conn, table: str, rows: int, seed: int = 7):
        self.conn, self.table, self.rng = conn, table, random.Random(seed)
        self.live = list(range(rows))
        self.next_id, self.next_v = rows, 1
        self.committed: dict[int, float] = {}       # v -> commit time

    def run(self, rate: int, seconds: float, stop: threading.Event) -> None:
        period, begin, done = PER_COMMIT / rate, time.monotonic(), 0
        cur = self.conn.cursor()
        while not stop.is_set() and time.monotonic() - begin < seconds:
            written = []
            with self.conn.transaction():
                for _ in range(PER_COMMIT):
                    roll = self.rng.random()
                    if roll < 0.1:
                        cur.execute(f"INSERT INTO {self.table} VALUES (%s, %s)", (self.next_id, self.next_v))
                        self.live.append(self.next_id)
                        self.next_id += 1
                    elif roll < 0.2 and len(self.live) > 1:
                        victim = self.live.pop(self.rng.randrange(len(self.live)))
                        cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (victim,))
                        continue
                    else:
                        cur.execute(f"UPDATE {self.table} SET v = %s WHERE id = %s",
                                    (self.next_v, self.rng.choice(self.live)))
                    written.append(self.next_v)
                    self.next_v += 1
            now = time.time()
            for v in written:
                self.committed[v] = now
            done += 1
            delay = begin + done * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)


class Monitor:
    """Reads each new snapshot's added files as it appears: the first snapshot holding a v."""

    def __init__(self, config: dict):
        self.config = config
        self.seen: dict[int, float] = {}
        self.processed: set[int] = set()
        self.missed = 0

    def poll(self) -> None:
        import pyarrow.parquet as pq

        table = load_catalog("default", self.config).load_table("bench.items")
        metadata, snapshot, fresh = table.metadata, table.metadata.current_snapshot(), []
        while snapshot is not None and snapshot.snapshot_id not in self.processed:
            fresh.append(snapshot)
            snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
        for snapshot in reversed(fresh):
            self.processed.add(snapshot.snapshot_id)
            try:
                manifests = snapshot.manifests(table.io)
                for manifest in manifests:
                    if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content.value != 0:
                        continue        # older files, or delete files (merge-on-read)
                    for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                        if entry.status.value != 1:
                            continue
                        path = entry.data_file.file_path.removeprefix("file://")
                        for v in pq.read_table(path, columns=["v"]).column("v").to_pylist():
                            self.seen.setdefault(v, snapshot.timestamp_ms / 1000)
            except FileNotFoundError:
                self.missed += 1       # expired before the monitor read it

    def loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll()
            except Exception:          # a table being created, a metadata file being replaced
                pass
            time.sleep(0.3)


def read_cost(spark, config: dict) -> tuple[float, list]:
    """Seconds SeaTide's Iceberg source takes to read the table back whole (best of three), and its rows."""
    from pyspark.sql import functions as F

    from seatide.connectors.iceberg.source import IcebergSource

    source = IcebergSource(read_options({"namespace": "bench", "table": "items", "iceberg.catalog.config": config},
                                        IcebergSource.options))
    ctx = ReadContext(spark, micro_batch=False, unbounded=False, parallelism=2, max_rows_per_batch=100_000,
                      read_interval_ms=1000, plugin_id="source[0]")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        source.read(ctx).agg(F.count("*"), F.sum("v"), F.max("id")).collect()
        times.append(time.perf_counter() - started)
    return min(times), sorted((r["id"], r["v"]) for r in source.read(ctx).collect())


def file_counts(config: dict, data_dir: str) -> dict:
    """Data and delete files on disk and live in the head (manifests read by SeaTide's planner)."""
    from seatide.connectors.iceberg.deletes import plan

    table = load_catalog("default", config).load_table("bench.items")
    head = table.metadata.current_snapshot()
    live = plan(table, head.snapshot_id if head else None)
    on_disk = [f for _, _, files in os.walk(data_dir) for f in files if f.endswith(".parquet")]
    # merge-on-read stages a batch's changed keys under keys/ (they become its equality deletes)
    deletes_dir = sum(1 for d, _, files in os.walk(data_dir) for f in files
                      if f.endswith(".parquet") and "keys" in d.split(os.sep))
    return {"data_files_on_disk": len(on_disk) - deletes_dir, "delete_files_on_disk": deletes_dir,
            "live_data_files": len(live.data), "live_delete_files": len(live.deletes)}


def compacted_read(spark, config: dict) -> float:
    """The table compacted by SeaTide's rewrite (deletes folded in), then read back as ``read_cost`` does."""
    from seatide.connectors.iceberg.maintenance import rewrite_small_files

    rewrite_small_files(spark, load_catalog("default", config), ("bench", "items"), None, 128 * 1024 * 1024)
    return read_cost(spark, config)[0]


def run_case(spark, server, tmp: str, name: str, rows: int, rate: int, seconds: float, maintenance: bool,
             mode: str = "cow", rewrite_every: int = 0) -> dict:
    database = f"bench_{name}"      # a database per case: each run starts from a source of its own
    with server.connect() as admin:
        admin.execute(f"CREATE DATABASE {database}")
    conn = server.connect(database)
    table = "items"
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v bigint)")
    conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    conn.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(0, {rows - 1}) g")
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/{database}"
    source = load_job_text(f'env {{ job.mode = "STREAMING" }}\nsource {{ Postgres-CDC {{ base-url = "{url}", '
                           f'username = postgres, password = "", table-names = ["{database}.public.{table}"] }} }}\n'
                           "sink { Console {} }").sources[0].plugin
    config = {"type": "hadoop", "warehouse": f"file://{tmp}/{name}/warehouse"}
    options = {"namespace": "bench", "table": "items", "iceberg.catalog.config": config,
               "iceberg.table.primary-keys": "id", "iceberg.table.upsert-mode-enabled": True,
               **(MAINTENANCE if maintenance else {}),
               **({"iceberg.maintenance.rewrite-every-commits": rewrite_every} if rewrite_every else {}),
               **({"iceberg.table.write-props": {"write.upsert.mode": "merge-on-read"}} if mode == "mor" else {})}
    sink = IcebergSink(read_options(options, IcebergSink.options))
    ctx = SinkContext(spark=spark, job_id=f"bench-{name}", pipeline_id=1, plugin_id="sink[0]", micro_batch=True,
                      unbounded=True, stdout=io.StringIO())
    writer, log = open_sink(sink, ctx), SinkCommitLog(f"{tmp}/{name}/log")
    lineage = f"T_bench-{name}_1_0_L_"
    batches: list[tuple[int, float]] = []

    def on_batch(df, batch_id):
        started = time.perf_counter()
        write_exactly_once(writer, log, df, batch_id, lineage + str(batch_id))
        batches.append((batch_id, time.perf_counter() - started))

    read = ReadContext(spark, micro_batch=True, unbounded=True, parallelism=1, max_rows_per_batch=100_000,
                       read_interval_ms=1000, plugin_id="source[0]", job_id=f"bench-{name}", pipeline_id=0)
    query = (source.read(read).writeStream.foreachBatch(on_batch).option("checkpointLocation", f"{tmp}/{name}/cp")
             .trigger(processingTime="1000 milliseconds").start())
    deadline = time.monotonic() + 300
    while not batches and time.monotonic() < deadline:        # the snapshot of the table is in
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.2)
    monitor, stop = Monitor(config), threading.Event()
    watcher = threading.Thread(target=monitor.loop, args=(stop,), daemon=True)
    watcher.start()
    changes = Changes(server.connect(database), table, rows)
    first_batch = len(batches)
    begun = time.monotonic()
    changes.run(rate, seconds, threading.Event())
    elapsed = time.monotonic() - begun
    deadline = time.monotonic() + 120
    while sum(v in monitor.seen for v in changes.committed) < len(changes.committed) and time.monotonic() < deadline:
        time.sleep(0.3)
    stop.set()
    watcher.join()
    query.stop()
    source.release(f"bench-{name}")
    latencies = sorted(monitor.seen[v] - t for v, t in changes.committed.items() if v in monitor.seen)
    committed_snapshots = len(batches) - first_batch
    iceberg = load_catalog("default", config).load_table("bench.items")
    meta_dir = f"{tmp}/{name}/warehouse/bench/items/metadata"
    durations = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else None  # noqa: E731
    result = {
        "mode": mode, "maintenance": maintenance, "rewrite_every_commits": rewrite_every, "rate": rate, "seconds": round(elapsed, 1), "table_rows": rows,
        "changes": len(changes.committed), "measured": len(latencies), "missed_snapshots": monitor.missed,
        "p50_s": pick(0.5), "p99_s": pick(0.99), "max_s": latencies[-1] if latencies else None,
        "batches": committed_snapshots, "snapshots_per_hour": round(committed_snapshots / elapsed * 3600),
        "batch_write_s_median": sorted(s for _, s in batches[first_batch:])[committed_snapshots // 2]
        if committed_snapshots else None,
        "snapshots_kept": len(iceberg.metadata.snapshots),
        # Spark's own account of the micro-batches that moved rows (medians; recentProgress keeps the last 100)
        "spark_batch_ms_median": {k: sorted(d.get(k, 0) for d in durations)[len(durations) // 2]
                                  for k in ("triggerExecution", "latestOffset", "getBatch", "addBatch")}
        if durations else {},
        **file_counts(config, f"{tmp}/{name}/warehouse/bench/items/data"), "metadata_files": len(os.listdir(meta_dir)),
        "load_average": os.getloadavg()[0],
    }
    if mode == "mor" or not maintenance:
        result["read_s"], read_rows = read_cost(spark, config)
        result["equals_source"] = read_rows == sorted(conn.execute(f"SELECT id, v FROM {table}").fetchall())
    if mode == "mor":
        result["read_compacted_s"] = compacted_read(spark, config)
        result["read_ratio"] = round(result["read_s"] / result["read_compacted_s"], 2)
    print(f"{mode}, {'with' if maintenance else 'without'} maintenance: {result['changes']} changes in {elapsed:.0f} s, "
          f"p50 {result['p50_s']:.2f} s, p99 {result['p99_s']:.2f} s, {committed_snapshots} batches "
          f"({result['snapshots_per_hour']}/h), kept {result['snapshots_kept']} snapshots, "
          f"{result['data_files_on_disk']} data and {result['delete_files_on_disk']} delete files on disk, "
          f"{result['metadata_files']} metadata files, read back in {result.get('read_s', 0):.2f} s "
          f"({result.get('read_ratio')}x compacted; {result['live_delete_files']} delete files live), "
          f"batch {result['batch_write_s_median']:.2f} s, Spark {result['spark_batch_ms_median']}, equals the "
          f"source: {result.get('equals_source')} (load {result['load_average']:.1f})", flush=True)
    return result


def plot(cases: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    labels = ["no maintenance", "maintenance"]
    left.bar([0, 1], [c["p50_s"] for c in cases], 0.35, label="p50")
    left.bar([0.35, 1.35], [c["p99_s"] for c in cases], 0.35, label="p99")
    left.set_xticks([0.17, 1.17], labels)
    left.set_ylabel("end-to-end latency (s)")
    left.legend()
    right.bar([0, 1], [c["snapshots_kept"] for c in cases], 0.35, label="snapshots kept")
    right.bar([0.35, 1.35], [c["data_files_on_disk"] for c in cases], 0.35, label="data files on disk")
    right.set_xticks([0.17, 1.17], labels)
    right.legend()
    fig.suptitle(f"Postgres-CDC -> Iceberg upserts at {cases[0]['rate']} changes/s", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def plot_modes(cases: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(11, 4))
    labels = [f"{c['mode']}" + (f" #{i // 2 + 1}" if len(cases) > 2 else "") for i, c in enumerate(cases)]
    x = list(range(len(cases)))
    axes[0].bar([i - 0.2 for i in x], [c["p50_s"] for c in cases], 0.4, label="p50")
    axes[0].bar([i + 0.2 for i in x], [c["p99_s"] for c in cases], 0.4, label="p99")
    axes[0].set_ylabel("end-to-end latency (s)")
    axes[1].bar([i - 0.2 for i in x], [c["data_files_on_disk"] for c in cases], 0.4, label="data files")
    axes[1].bar([i + 0.2 for i in x], [c["delete_files_on_disk"] for c in cases], 0.4, label="delete files")
    axes[1].set_ylabel("files on disk")
    axes[2].bar(x, [c["read_s"] for c in cases], 0.5, label="read back (s)")
    axes[2].set_ylabel("SeaTide source reads the table (s)")
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.legend()
    fig.suptitle(f"Postgres-CDC -> Iceberg at {cases[0]['rate']} changes/s: copy-on-write vs merge-on-read",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--modes", default=None, help="cow,mor: compare the ways changes are applied instead")
    parser.add_argument("--rounds", type=int, default=1, help="with --modes: rounds, the modes alternating")
    parser.add_argument("--rewrite-every", type=int, default=0,
                        help="with --modes: iceberg.maintenance.rewrite-every-commits of every case (0: none)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",")] if args.modes else []
    if any(m not in ("cow", "mor") for m in modes):
        parser.error("--modes takes cow and/or mor, e.g. --modes cow,mor")
    server = PrivatePostgres().start()
    spark = build_session("iceberg-cdc-bench", {"spark.master": "local[2]"})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if modes:
                cases = [run_case(spark, server, tmp, f"{mode}{r}", args.rows, args.rate, args.seconds, False, mode,
                                  args.rewrite_every)
                         for r in range(args.rounds) for mode in modes]
            else:
                cases = [run_case(spark, server, tmp, name, args.rows, args.rate, args.seconds, maintenance)
                         for name, maintenance in (("plain", False), ("maintained", True))]
    finally:
        spark.stop()
        server.stop()
    name = "iceberg_cdc_modes" if modes else "iceberg_cdc"
    path = write_results(name, {"command": "bench/iceberg_cdc.py " + " ".join(sys.argv[1:]), "cases": cases})
    png = path.removesuffix(".json") + ".png"
    drawn = (plot_modes if modes else plot)(cases, png)
    print(f"wrote {path}" + (f" and {png}" if drawn else " (no plot: pip install -e .[bench])"))


if __name__ == "__main__":
    main()
