"""End-to-end latency of MySQL-CDC: commit in MariaDB -> the row printed by the job's sink.

    PYTHONPATH=src .venv/bin/python bench/cdc_latency_mysql.py [--rate 1000] [--seconds 30]

Starts a private MariaDB with the binlog on (as the tests do), runs a real STREAMING job
with ``seatide run`` (MySQL-CDC -> Console, checkpoint.interval 1 s), then commits
``rate`` changes per second for ``seconds`` — half inserts, half updates, each stamped
with a unique sequence number in column ``n`` — in transactions of 10 changes every
10 ms. A change's latency is the time from its COMMIT returning to its line appearing on
the job's stdout. Prints p50, p99 and max, and the rate actually achieved.
``--in-process`` measures the connector without the control plane (see its help).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)   # tests.cluster.harness, which the server fixtures use
sys.path.insert(0, os.path.join(ROOT, "tests", "connectors"))

from cdc_mysql_server import start_private_mariadb, stop_private_mariadb  # noqa: E402

TABLE = "bench_cdc.changes"
CHANGES_PER_TX = 10
SNAPSHOT_ROWS = 1000
LINE = re.compile(r"kind=(\+I|\+U) : (\d+), (-?\d+),")

JOB = """
env {{ job.mode = "STREAMING", checkpoint.interval = 1000 }}
source {{ MySQL-CDC {{
  base-url = "{url}", username = "root", password = "", table-names = ["{table}"]
  startup.mode = "initial", server-id = 6601
}} }}
sink {{ Console {{}} }}
"""


class Arrivals:
    """Sequence number -> when its row reached the sink's output."""

    def __init__(self):
        self.seen: dict[int, float] = {}
        self.lock = threading.Lock()

    def note(self, seq: int) -> None:
        now = time.monotonic()
        with self.lock:
            self.seen.setdefault(seq, now)

    def follow(self, stream) -> None:
        """Read the job's stdout (Console lines) in a thread."""
        def read() -> None:
            for line in stream:
                match = LINE.search(line)
                if match:
                    self.note(int(match.group(3)))
        threading.Thread(target=read, daemon=True).start()

    def count_at_least(self, low: int) -> int:
        with self.lock:
            return sum(1 for seq in self.seen if seq >= low)


class JobLog:
    """The job's stderr (progress lines): kept in CDC_BENCH_JOB_LOG if set; notes the highest
    attempt number, since a retried driver's restart lands in the latencies."""

    def __init__(self, stream):
        self.attempts = 1
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        with open(os.environ.get("CDC_BENCH_JOB_LOG", os.devnull), "w") as log:
            for line in stream:
                log.write(line)
                match = re.search(r"attempt (\d+)", line)
                if match:
                    self.attempts = max(self.attempts, int(match.group(1)))


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.05)


def drive(server, rate: int, seconds: float, first_seq: int) -> tuple[dict[int, float], float]:
    """Commit ``rate`` changes/s; returns seq -> commit time and the seconds it took."""
    committed: dict[int, float] = {}
    ticks = int(rate * seconds / CHANGES_PER_TX)
    period = CHANGES_PER_TX / rate
    seq, next_id = first_seq, 10 ** 6
    with server.connect(database=None, autocommit=False) as conn, conn.cursor() as cur:
        start = time.monotonic()
        for tick in range(ticks):
            delay = start + tick * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            batch = []
            for i in range(CHANGES_PER_TX):
                seq += 1
                if i % 2 == 0:
                    next_id += 1
                    cur.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, 'x')", (next_id, seq))
                else:
                    cur.execute(f"UPDATE {TABLE} SET n = %s WHERE id = %s", (seq, 1 + seq % SNAPSHOT_ROWS))
                batch.append(seq)
            conn.commit()
            now = time.monotonic()
            committed.update((s, now) for s in batch)
        return committed, time.monotonic() - start


def in_process_query(job_text: str, workdir: str, arrivals: Arrivals):
    from seatide.config.loader import load_job_text
    from seatide.plugin.base import ReadContext
    from seatide.runtime.session import build_session

    spark = build_session("cdc-latency", {"spark.master": "local[2]"})
    plugin = load_job_text(job_text).sources[0].plugin
    df = plugin.read(ReadContext(spark, micro_batch=True, unbounded=True, parallelism=2,
                                 max_rows_per_batch=1_000_000, read_interval_ms=1000, plugin_id="source[0]"))

    def sink(batch_df, batch_id) -> None:
        for row in batch_df.select("n").toLocalIterator():
            arrivals.note(row.n)

    return (df.writeStream.trigger(processingTime="1 second").foreachBatch(sink)
            .option("checkpointLocation", os.path.join(workdir, "checkpoint")).start())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1000, help="changes per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--in-process", action="store_true",
                        help="no control plane: the source in this process's SparkSession, a foreachBatch "
                             "sink that pulls rows to the driver, a 1 s trigger")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="seatide-mysql-cdc-bench-")
    server, mariadb = start_private_mariadb(workdir)
    job = query = job_log = None
    try:
        server.execute("CREATE DATABASE bench_cdc",
                       f"CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, n BIGINT, note VARCHAR(16))",
                       f"INSERT INTO {TABLE} SELECT seq, -seq, 'snap' FROM seq_1_to_{SNAPSHOT_ROWS}")
        job_text = JOB.format(url=server.url, table=TABLE)
        arrivals = Arrivals()
        started = time.monotonic()
        if args.in_process:
            query = in_process_query(job_text, workdir, arrivals)
        else:
            job_file = os.path.join(workdir, "job.conf")
            with open(job_file, "w") as handle:
                handle.write(job_text)
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            job = subprocess.Popen([sys.executable, "-m", "seatide.cli.main", "run", job_file,
                                    "--data-dir", os.path.join(workdir, "seatide")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            arrivals.follow(job.stdout)
            job_log = JobLog(job.stderr)
        # Snapshot rows carry n = -id: the job is live once the last of them is out.
        wait_for(lambda: -SNAPSHOT_ROWS in arrivals.seen, 300, "the snapshot to reach the sink")
        print(f"job live (snapshot of {SNAPSHOT_ROWS} rows out) after {time.monotonic() - started:.1f} s")
        committed, took = drive(server, args.rate, args.seconds, first_seq=0)
        wait_for(lambda: arrivals.count_at_least(1) >= len(committed), 120, "every change to reach the sink")
        latencies = [arrivals.seen[s] - t for s, t in committed.items()]
        print(f"changes: {len(committed)} in {took:.1f} s ({len(committed) / took:.0f}/s achieved, "
              f"target {args.rate}/s), checkpoint.interval 1 s")
        print(f"latency commit -> sink output: p50 {percentile(latencies, 0.50):.3f} s, "
              f"p99 {percentile(latencies, 0.99):.3f} s, max {max(latencies):.3f} s, "
              f"mean {statistics.fmean(latencies):.3f} s")
        if job_log is not None:
            print(f"driver attempts: {job_log.attempts} (more than 1: the job was retried, and the restart "
                  "is part of the latencies)")
    finally:
        if query is not None:
            query.stop()
        if job is not None and job.poll() is None:
            job.send_signal(signal.SIGINT)
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()
        stop_private_mariadb(mariadb)
        if os.environ.get("CDC_BENCH_KEEP"):
            print(f"kept {workdir} (the job's data directory is {workdir}/seatide)")
        else:
            subprocess.run(["rm", "-rf", workdir], check=False)


if __name__ == "__main__":
    main()
