"""Whole-database jobs (issue 24): many tables in one job, against Spark doing the same by hand.

    PYTHONPATH=src:. .venv/bin/python bench/multi_table.py snapshot [--tables 100] [--rows 20000]
    PYTHONPATH=src:. .venv/bin/python bench/multi_table.py memory [--tables 1,10,100] [--source fake|jdbc]
    PYTHONPATH=src:. .venv/bin/python bench/multi_table.py cdc [--tables 100] [--rate 1000] [--seconds 60]

snapshot: ``--tables`` PostgreSQL tables of ``--rows`` rows (id bigint key, name text, amount
numeric(12,2), at timestamp) copied into MariaDB, each case a fresh process, alternating:

* Spark by hand (a fresh PySpark process): for each table, ``spark.read.jdbc`` partitioned by id
  into as many ranges as cores, then ``write.jdbc`` (batched inserts), one table after another;
* SeaTide, one job (``seatide run``, a fresh process): a Jdbc source with ``table_list`` of every
  table into a Jdbc sink (``${table_name}``, created by the save mode), plain BATCH and
  checkpointed (micro-batches of ``--max-rows``).

memory: ``seatide run`` of a checkpointed job of N tables per N: ``--source fake``, FakeSource
``tables_configs`` (``--rows`` each) into LocalFile; ``--source jdbc``, a Jdbc ``table_list`` of
PostgreSQL tables into MariaDB. The driver's peak PSS (psutil, every 0.2 s): its Python, its JVM,
the Python processes under it (counted), and their sum.

cdc: ``--tables`` tables on a private PostgreSQL (wal_level = logical); a writer commits
``--rate`` inserts per second over random tables (transactions of 10 rows); a Postgres-CDC job
of every table into MariaDB (targets created with an extra ``landed`` column defaulting to the
time of the insert there); each row's latency is ``landed`` minus its source ``created``
(clock_timestamp() of its insert; both servers share this machine's clock). Prints p50, p99,
max after a warm-up.

Writes bench/results/multi_table_snapshot.json, multi_table_memory_<source>.json and
multi_table_cdc_<tables>.json (and a PNG where there is something to plot).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "src"))

import psutil  # noqa: E402
import psycopg  # noqa: E402
import pymysql  # noqa: E402

PG = "jdbc:postgresql://127.0.0.1:5432/test"
MARIA = "jdbc:mariadb://127.0.0.1:3306/test"
RESULTS = os.environ.get("SEATIDE_BENCH_RESULTS") or os.path.join(ROOT, "bench", "results")
HAND_URL = "jdbc:mysql://127.0.0.1:3306/bench_hand?permitMysqlScheme"


def pg():
    return psycopg.connect(host="127.0.0.1", port=5432, dbname="test", user="postgres", autocommit=True)


def maria(database: str | None = "test"):
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                           autocommit=True)


def write_result(case: str, result: dict, plot=None) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"multi_table_{case}.json")
    with open(path, "w") as handle:
        json.dump(result, handle, indent=2)
    print(f"wrote {path}")
    if plot is not None:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("(no plot: pip install -e .[bench])")
            return
        fig, ax = plt.subplots(figsize=(6, 3.5))
        plot(ax)
        fig.tight_layout()
        fig.savefig(path.removesuffix(".json") + ".png", dpi=110)
        print(f"wrote {path.removesuffix('.json')}.png")


# -- snapshot ---------------------------------------------------------------------------------------

HAND = """
import sys
from seatide.runtime.session import build_session
names, rows = sys.argv[1].split(","), int(sys.argv[2])
spark = build_session("spark-by-hand", {"spark.master": "local[2]"})
cores = spark.sparkContext.defaultParallelism
for name in names:
    df = spark.read.jdbc("%(pg)s", name, column="id", lowerBound=1, upperBound=rows + 1, numPartitions=cores,
                         properties={"user": "postgres", "driver": "org.postgresql.Driver"})
    # MariaDB's driver under a jdbc:mysql: URL (permitMysqlScheme): Spark speaks MySQL's dialect
    df.write.jdbc("%(hand)s", name, mode="append", properties={"user": "root", "password": "",
                  "driver": "org.mariadb.jdbc.Driver", "rewriteBatchedStatements": "true", "batchsize": "1000"})
spark.stop()
"""


def snapshot(args) -> None:
    prefix = f"mt{secrets.token_hex(2)}_"
    names = [f"{prefix}{i:03d}" for i in range(args.tables)]
    _create_pg_tables(names, args.rows)
    work = tempfile.mkdtemp(prefix="bench-mt-")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))

    def clean_targets(database: str) -> None:
        with maria(None) as db, db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
            cur.execute(f"CREATE DATABASE {database}")

    def by_hand() -> None:
        clean_targets("bench_hand")
        code = HAND % {"pg": PG, "hand": HAND_URL}
        subprocess.run([sys.executable, "-c", code, ",".join(names), str(args.rows)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def seatide(extra_env: str):
        def run() -> None:
            clean_targets("bench_tide")
            entries = ", ".join(f'{{ table_path = "public.{n}" }}' for n in names)
            conf = os.path.join(work, "job.conf")
            with open(conf, "w") as handle:
                handle.write(f"""
env {{ job.mode = BATCH {extra_env} }}
source {{ Jdbc {{ url = "{PG}", user = "postgres", password = "", table_list = [{entries}] }} }}
sink {{ Jdbc {{ url = "jdbc:mariadb://127.0.0.1:3306/bench_tide", user = "root", password = "",
               database = "bench_tide", primary_keys = [] }} }}
""")
            subprocess.run([sys.executable, "-m", "seatide.cli.main", "run", conf, "--data-dir",
                            os.path.join(work, secrets.token_hex(3))], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return run

    def count(database: str) -> int:
        with maria(database) as db, db.cursor() as cur:
            return sum(cur.execute(f"SELECT COUNT(*) FROM {n}") and cur.fetchone()[0] for n in names)

    cases = {"spark_by_hand": by_hand, "seatide_plain": seatide(""),
             "seatide_checkpointed": seatide(f", checkpoint.interval = 1000, micro-batch.max-rows = {args.max_rows}")}
    times: dict[str, list[float]] = {k: [] for k in cases}
    loads: list[float] = []          # the machine's 1-minute load average after each round
    try:
        for round_no in range(1, args.rounds + 1):
            order = list(cases) if round_no % 2 else list(reversed(cases))
            for label in order:
                started = time.perf_counter()
                cases[label]()
                times[label].append(time.perf_counter() - started)
                assert count("bench_tide" if label != "spark_by_hand" else "bench_hand") == args.tables * args.rows
            loads.append(os.getloadavg()[0])
            print(f"round {round_no}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items())
                  + f" (load {loads[-1]:.1f} on {os.cpu_count()} cores)", flush=True)
    finally:
        _drop_pg_tables(names)
        with maria(None) as db, db.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS bench_hand")
            cur.execute("DROP DATABASE IF EXISTS bench_tide")
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratios = {k: medians["spark_by_hand"] / medians[k] for k in cases if k != "spark_by_hand"}
    # rounds run alternating under the same load: the median of the per-round ratios is steadier
    paired = {k: statistics.median(h / s for h, s in zip(times["spark_by_hand"], times[k])) for k in ratios}
    rows = args.tables * args.rows
    for label, seconds in medians.items():
        print(f"{label}: {seconds:.1f} s ({rows / seconds:,.0f} rows/s)"
              + (f", throughput {ratios[label]:.2f}x of Spark by hand (median of per-round ratios "
                 f"{paired[label]:.2f}x; goal >= 0.8x)" if label in ratios else ""))

    def plot(ax):
        ax.bar(list(medians), [rows / s for s in medians.values()], color=["grey", "tab:blue", "tab:green"])
        ax.set_ylabel("rows/s (each a fresh process)")
        ax.set_title(f"{args.tables} tables x {args.rows:,} rows, PostgreSQL -> MariaDB", fontsize=9)
    write_result("snapshot", {"tables": args.tables, "rows_per_table": args.rows, "rounds": times,
                              "median_s": medians, "throughput_ratio_vs_spark": ratios,
                              "median_paired_ratio": paired, "load_average_1m": loads}, plot)


# -- driver memory ----------------------------------------------------------------------------------

def _memory_job(source: str, count: int, rows: int, out: str) -> tuple[str, list[str]]:
    """(job text, PostgreSQL tables it reads) of a checkpointed job of ``count`` tables."""
    if source == "fake":
        tables = ", ".join(f'{{ row.num = {rows}, sequence.field = id, schema {{ table = "db.t{i}", '
                           f'fields {{ id = bigint, name = string, amount = double }} }} }}' for i in range(count))
        return f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 200000 }}
source {{ FakeSource {{ tables_configs = [{tables}] }} }}
sink {{ LocalFile {{ path = "{out}/${{table_name}}", file_format_type = "parquet" }} }}
""", []
    names = [f"mtm{secrets.token_hex(2)}_{i:03d}" for i in range(count)]
    _create_pg_tables(names, rows)
    entries = ", ".join(f'{{ table_path = "public.{n}" }}' for n in names)
    return f"""
env {{ job.mode = BATCH, checkpoint.interval = 1000, micro-batch.max-rows = 200000 }}
source {{ Jdbc {{ url = "{PG}", user = "postgres", password = "", table_list = [{entries}] }} }}
sink {{ Jdbc {{ url = "jdbc:mariadb://127.0.0.1:3306/bench_mem", user = "root", password = "",
               database = "bench_mem", primary_keys = [] }} }}
""", names


def _driver_sizes(driver: psutil.Process) -> dict:
    """PSS (a forked process's pages shared with its parent counted once) of the driver's Python,
    its JVM and the Python processes under it (Spark's workers, one per Python streaming source)."""
    sizes = {"driver_python": driver.memory_full_info().pss, "driver_jvm": 0, "python_workers": 0,
             "python_processes": 0}
    for p in driver.children(recursive=True):
        try:
            # By the program it runs, not its name: a process the JVM forks (a Python worker, chmod)
            # runs the JVM's image, named after the forking thread, until its exec.
            if os.path.basename((p.cmdline() or [""])[0]) == "java":
                sizes["driver_jvm"] += p.memory_full_info().pss
            else:
                sizes["python_workers"] += p.memory_full_info().pss
                sizes["python_processes"] += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    sizes["driver_tree"] = sizes["driver_python"] + sizes["driver_jvm"] + sizes["python_workers"]
    return sizes


def memory(args) -> None:
    peaks = {}
    for count in [int(n) for n in args.tables.split(",")]:
        out = tempfile.mkdtemp(prefix="bench-mt-mem-")
        job, names = _memory_job(args.source, count, args.rows, out)
        if args.source == "jdbc":
            with maria(None) as db, db.cursor() as cur:
                cur.execute("DROP DATABASE IF EXISTS bench_mem")
                cur.execute("CREATE DATABASE bench_mem")
        conf = os.path.join(out, "job.conf")
        with open(conf, "w") as handle:
            handle.write(job)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "seatide.cli.main", "run", conf, "--data-dir",
                                 os.path.join(out, "data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
        peak = dict.fromkeys(["driver_python", "driver_jvm", "python_workers", "python_processes", "driver_tree"], 0)
        watched = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                for child in watched.children(recursive=True):
                    try:
                        if "seatide.runtime.driver" in " ".join(child.cmdline()):
                            sizes = _driver_sizes(child)
                            peak = {k: max(v, sizes[k]) for k, v in peak.items()}
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
                time.sleep(0.2)
        finally:
            _drop_pg_tables(names)
        assert proc.returncode == 0, f"the job of {count} tables failed"
        peaks[count] = {k: v if k == "python_processes" else round(v / 2**20) for k, v in peak.items()}
        peaks[count]["seconds"] = round(time.perf_counter() - started, 1)
        peaks[count]["load_1min"] = round(os.getloadavg()[0], 1)      # the machine is shared
        print(f"{count} tables: driver Python {peaks[count]['driver_python']} MiB, JVM {peaks[count]['driver_jvm']} "
              f"MiB, {peaks[count]['python_processes']} Python processes {peaks[count]['python_workers']} MiB; "
              f"driver tree {peaks[count]['driver_tree']} MiB (peak PSS each; {peaks[count]['seconds']} s, load "
              f"{peaks[count]['load_1min']})", flush=True)
    if args.source == "jdbc":
        with maria(None) as db, db.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS bench_mem")

    def plot(ax):
        counts = list(peaks)
        for key, label in (("driver_tree", "driver tree"), ("python_workers", "Python processes under it"),
                           ("driver_jvm", "driver JVM"), ("driver_python", "driver Python")):
            ax.plot(counts, [peaks[c][key] for c in counts], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("tables in the job")
        ax.set_ylabel("peak PSS (MiB)")
        ax.set_title(f"checkpointed {args.source} job, {args.rows:,} rows a table", fontsize=9)
        ax.legend(fontsize=8)
    write_result(f"memory_{args.source}", {"source": args.source, "rows_per_table": args.rows,
                                           "peak_pss_mib": peaks}, plot)


def _create_pg_tables(names: list[str], rows: int) -> None:
    with pg() as conn:
        for name in names:
            conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, name text, amount numeric(12,2), at timestamp)")
            conn.execute(f"INSERT INTO {name} SELECT g, 'name-' || g, g / 100.0, TIMESTAMP '2024-01-01' + "
                         f"g * INTERVAL '1 second' FROM generate_series(1, {rows}) g")
            conn.execute(f"ANALYZE {name}")


def _drop_pg_tables(names: list[str]) -> None:
    with pg() as conn:
        for name in names:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


# -- CDC latency ------------------------------------------------------------------------------------

def cdc(args) -> None:
    import logging

    from seatide.runtime.session import build_session
    from seatide.store.jobs import request_stop
    from seatide.testing.servers import PrivatePostgres
    from tests.e2e.harness import InProcessCluster

    # each batch's staging and commit times (the Jdbc sink logs them) on stderr
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("seatide.connectors.jdbc.targets").setLevel(logging.INFO)
    logging.getLogger("seatide.runtime.table_routing").setLevel(logging.INFO)
    logging.getLogger("seatide.runtime.local_batch").setLevel(logging.INFO)
    server = PrivatePostgres().start()
    names = [f"t{i:03d}" for i in range(args.tables)]
    target = f"bench_cdc_{secrets.token_hex(2)}"
    latencies: list[float] = []
    missing = [0]             # changes written but not landed 300 s after the writer stopped
    try:
        with server.connect() as admin:
            admin.execute("CREATE DATABASE bench")
        with server.connect("bench") as conn:
            for name in names:
                conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, created timestamp(6) DEFAULT "
                             "clock_timestamp(), v int)")
        with maria(None) as db, db.cursor() as cur:
            cur.execute(f"CREATE DATABASE {target}")
            for name in names:
                cur.execute(f"CREATE TABLE {target}.{name} (id bigint PRIMARY KEY, created datetime(6), v int, "
                            "landed datetime(6) DEFAULT CURRENT_TIMESTAMP(6))")
        spark = build_session("bench-multi-table-cdc", {"spark.master": "local[2]"})
        cluster = InProcessCluster(spark, tempfile.mkdtemp(prefix="bench-mt-cdc-"))
        job = f"""
env {{ job.mode = "STREAMING", checkpoint.interval = {args.interval_ms} }}
source {{ Postgres-CDC {{ base-url = "jdbc:postgresql://127.0.0.1:{server.port}/bench", username = "postgres",
                         password = "", table-names = [{", ".join(f'"bench.public.{n}"' for n in names)}] }} }}
sink {{ Jdbc {{ url = "jdbc:mariadb://127.0.0.1:3306/{target}", user = "root", password = "", database = "{target}",
               primary_keys = ["id"] }} }}
"""
        stop = threading.Event()
        written = [0]

        def writer() -> None:
            next_id, interval = 1, 10 / args.rate
            with server.connect("bench") as conn:
                ticks = time.perf_counter()
                while not stop.is_set():
                    with conn.transaction():
                        for _ in range(10):
                            conn.execute(f"INSERT INTO {random.choice(names)} (id, v) VALUES (%s, 1)", (next_id,))
                            next_id += 1
                    written[0] = next_id - 1
                    ticks += interval
                    time.sleep(max(0.0, ticks - time.perf_counter()))

        def drive(store, job_id) -> None:
            try:
                # the stream runs once a row inserted now has landed (a batch without rows commits nothing)
                with server.connect("bench") as conn:
                    conn.execute(f"INSERT INTO {names[0]} (id, v) VALUES (-1, 0)")
                deadline = time.time() + 300
                while time.time() < deadline and not _landed(target, names[0], -1):
                    time.sleep(0.5)
                assert _landed(target, names[0], -1), "the CDC job did not stream within 300 s"
                thread = threading.Thread(target=writer, daemon=True)
                started = time.time()
                thread.start()
                time.sleep(args.seconds)
                stop.set()
                thread.join()
                deadline = time.time() + 300                  # every change landed, or 300 s passed
                while time.time() < deadline and _landed_count(target, names) < written[0]:
                    time.sleep(0.5)
                missing[0] = written[0] - _landed_count(target, names)
                with maria(target) as db, db.cursor() as cur:
                    for name in names:
                        cur.execute(f"SELECT TIMESTAMPDIFF(MICROSECOND, created, landed) FROM {name} "
                                    f"WHERE created >= FROM_UNIXTIME(%s)", (started + args.warmup,))
                        latencies.extend(r[0] / 1e6 for r in cur.fetchall())
            finally:
                request_stop(store, job_id, savepoint=False, actor="bench")

        run = cluster.run(job, stop_after=drive)
        print(f"job {run.status}: {run.error or ''}")
        spark.stop()
    finally:
        server.stop()
        with maria(None) as db, db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {target}")
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else None
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else None
    print(f"{len(latencies)} rows over {args.tables} tables at {args.rate}/s: p50 {p50:.2f} s, p99 {p99:.2f} s, "
          f"max {latencies[-1]:.2f} s (goal: p99 <= 2 s); {missing[0]} not landed; load {os.getloadavg()[0]:.1f}"
          if latencies else "no rows measured")
    write_result(f"cdc_{args.tables}", {"tables": args.tables, "rate": args.rate, "seconds": args.seconds,
                                        "interval_ms": args.interval_ms, "rows": len(latencies), "p50_s": p50,
                                        "p99_s": p99, "max_s": latencies[-1] if latencies else None,
                                        "not_landed": missing[0], "load_average_1m": os.getloadavg()[0]})


def _landed_count(database: str, names: list[str]) -> int:
    with maria(database) as db, db.cursor() as cur:
        cur.execute(" UNION ALL ".join(f"SELECT COUNT(*) FROM {n} WHERE id > 0" for n in names))
        return sum(r[0] for r in cur.fetchall())


def _landed(database: str, table: str, row_id: int) -> bool:
    with maria(database) as db, db.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {table} WHERE id = %s", (row_id,))
        return cur.fetchone() is not None


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="case", required=True)
    one = sub.add_parser("snapshot")
    one.add_argument("--tables", type=int, default=100)
    one.add_argument("--rows", type=int, default=20_000)
    one.add_argument("--rounds", type=int, default=2)
    one.add_argument("--max-rows", type=int, default=500_000)
    two = sub.add_parser("memory")
    two.add_argument("--tables", default="1,10,100")
    two.add_argument("--rows", type=int, default=50_000)
    two.add_argument("--source", choices=["fake", "jdbc"], default="fake",
                     help="FakeSource tables_configs into LocalFile, or a Jdbc table_list into MariaDB")
    three = sub.add_parser("cdc")
    three.add_argument("--tables", type=int, default=100)
    three.add_argument("--rate", type=int, default=1000)
    three.add_argument("--seconds", type=int, default=60)
    three.add_argument("--warmup", type=int, default=10)
    three.add_argument("--interval-ms", type=int, default=500)
    args = parser.parse_args()
    {"snapshot": snapshot, "memory": memory, "cdc": cdc}[args.case](args)


if __name__ == "__main__":
    main()
