"""SeaTide STREAMING vs a hand-written Structured Streaming query: throughput and latency.

    .venv/bin/python bench/streaming_vs_pyspark.py [--intervals 1000,10000] [--rate 20000]
                                                   [--seconds 40] [--burst-rows 1000000]
                                                   [--bursts 5] [--rounds 1]

Source both can use alike: parquet files landing in a directory (written aside and renamed
in, so a file is whole when it appears), each row stamped with the epoch ms its file landed
(``gen_ms``). Sink: parquet files. SeaTide runs ``seatide run`` on a STREAMING job
(LocalFile source -> LocalFile sink, ``checkpoint.interval`` = the case's interval); the
baseline is ``handwritten_files_stream.py`` (file stream -> Spark's parquet file sink, the
same processing-time trigger). Each side gets a fresh process and its own directories.

For each side and interval:

* warm-up: one seed file; timing starts once its rows are visible (start-up is reported
  apart, it is the batch bench's subject);
* latency: ``--rate`` rows/s for ``--seconds`` s in files every 0.25 s; a row's latency is
  the moment a poller (every 50 ms) first sees its file in the sink minus ``gen_ms``.
  Visible means committed: SeaTide moves a batch's files into the sink directory only when
  the batch commits; Spark's file sink lists committed files in ``_spark_metadata``;
* throughput: ``--burst-rows`` rows land at once (ten files written aside, then renamed in one
  after another with nothing between), ``--bursts`` times, each once the one before is all
  visible; a burst's rate is rows / (last one visible - landing), the side's the median. That
  includes the wait for the next trigger (up to one interval), so a single burst's ratio
  swings with where in the interval it lands; the median of several is what is compared.

Writes bench/results/streaming_vs_pyspark.json and .png.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from side_by_side import draw_pairs, pyplot, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEATIDE = os.path.join(ROOT, ".venv", "bin", "seatide")
FILE_EVERY_S = 0.25
POLL_S = 0.05
SEED, STEADY, BURST = 0, 1, 2     # a row's phase; the k-th burst's rows are phase BURST + k
BURST_FILES = 10

JOB = """
env {{ job.name = "stream-bench", job.mode = STREAMING, parallelism = 2, checkpoint.interval = {interval} }}
source {{ LocalFile {{ path = "{source}", file_format_type = "parquet" }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet", compress_codec = "snappy" }} }}
"""


class Landing:
    """Writes parquet files into the source directory, each whole when it appears."""

    def __init__(self, directory: str):
        self.directory, self.files, self.next_id = directory, 0, 0
        os.makedirs(directory)

    def land(self, rows: int, phase: int) -> None:
        self.publish([self.stage(rows, phase)])

    def stage(self, rows: int, phase: int) -> str:
        """Writes a file aside (a dot file the readers skip); ``publish`` moves it in."""
        ids = np.arange(self.next_id, self.next_id + rows, dtype=np.int64)
        self.next_id += rows
        table = pa.table({"id": ids, "name": pa.array(np.char.mod("n%05d", ids % 100000)),
                          "value": ids * 0.5, "phase": np.full(rows, phase, dtype=np.int32),
                          "gen_ms": np.full(rows, int(time.time() * 1000), dtype=np.int64)})
        staged = os.path.join(self.directory, f".landing-{self.files}.parquet")
        pq.write_table(table, staged)
        self.files += 1
        return staged

    def publish(self, staged: list[str]) -> int:
        """Renames staged files in, back to back; returns the epoch ms they landed."""
        for path in staged:
            number = int(os.path.basename(path).split("-")[1].split(".")[0])
            os.rename(path, os.path.join(self.directory, f"part-{number:06d}.parquet"))
        return int(time.time() * 1000)


class SinkWatch(threading.Thread):
    """Polls the sink for committed files; records when each row was first seen."""

    def __init__(self, out: str, spark_log: bool):
        super().__init__(daemon=True)
        self.out, self.spark_log = out, spark_log
        self.seen: set[str] = set()
        self.rows: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)  # phase -> (gen, seen)
        self.stopped = threading.Event()

    def committed_files(self) -> list[str]:
        if not self.spark_log:
            try:
                return [os.path.join(self.out, f) for f in os.listdir(self.out)
                        if f.endswith(".parquet") and not f.startswith((".", "_"))]
            except FileNotFoundError:
                return []
        log_dir, files = os.path.join(self.out, "_spark_metadata"), []
        try:
            names = os.listdir(log_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.startswith("."):
                continue
            with open(os.path.join(log_dir, name)) as handle:
                files += [json.loads(line)["path"].removeprefix("file://")
                          for line in handle.read().splitlines()[1:] if line.strip()]
        return files

    def run(self) -> None:
        while not self.stopped.is_set():
            for path in self.committed_files():
                if path in self.seen:
                    continue
                now = int(time.time() * 1000)
                self.seen.add(path)
                table = pq.read_table(path, columns=["phase", "gen_ms"])
                for phase, gen in zip(table["phase"].to_pylist(), table["gen_ms"].to_pylist()):
                    self.rows[phase].append((gen, now))
            time.sleep(POLL_S)

    def wait_for(self, phase: int, rows: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.rows[phase]) >= rows:
                return True
            time.sleep(POLL_S)
        return False


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def start_side(side: str, tmp: str, interval: int, source: str, out: str) -> subprocess.Popen:
    if side == "seatide":
        conf = os.path.join(tmp, "job.conf")
        with open(conf, "w") as handle:
            handle.write(JOB.format(interval=interval, source=source, out=out))
        command = [SEATIDE, "run", conf, "--data-dir", os.path.join(tmp, "data")]
    else:
        command = [sys.executable, os.path.join(HERE, "handwritten_files_stream.py"), source, out,
                   os.path.join(tmp, "checkpoint"), str(interval)]
    # Its own process group: the bench stops exactly what it started.
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "stderr"), "w"),
                            start_new_session=True)


def stop_side(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def median_side(results: list[dict]) -> dict:
    """One side over the rounds: each number its median (the plot's and the JSON's summary)."""
    summary = dict(results[0])
    for key, value in results[0].items():
        if isinstance(value, (int, float)):
            summary[key] = statistics.median(r[key] for r in results)
    return summary


def run_side(side: str, interval: int, args, tmp_root: str, round_no: int) -> dict:
    tmp = os.path.join(tmp_root, f"{side}-{interval}-{round_no}")
    os.makedirs(tmp)
    source, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    landing = Landing(source)
    per_file = int(args.rate * FILE_EVERY_S)
    landing.land(per_file, SEED)
    load = os.getloadavg()[0]
    started = time.monotonic()
    process = start_side(side, tmp, interval, source, out)
    watch = SinkWatch(out, spark_log=side == "hand")
    watch.start()
    try:
        assert watch.wait_for(SEED, per_file, 300), f"{side}: the seed rows never became visible"
        startup_s = time.monotonic() - started
        steady_files = int(args.seconds / FILE_EVERY_S)
        begin = time.monotonic()
        for n in range(steady_files):
            time.sleep(max(0.0, begin + n * FILE_EVERY_S - time.monotonic()))
            landing.land(per_file, STEADY)
        steady_rows = steady_files * per_file
        assert watch.wait_for(STEADY, steady_rows, 3 * interval / 1000 + 120), f"{side}: steady rows missing"
        burst_rows = BURST_FILES * (args.burst_rows // BURST_FILES)
        bursts = []     # (rows/s, s)
        for k in range(args.bursts):
            staged = [landing.stage(args.burst_rows // BURST_FILES, BURST + k) for _ in range(BURST_FILES)]
            landed_ms = landing.publish(staged)
            assert watch.wait_for(BURST + k, burst_rows, 3 * interval / 1000 + 300), f"{side}: burst rows missing"
            took = (max(s for _, s in watch.rows[BURST + k]) - landed_ms) / 1000
            bursts.append((burst_rows / took, took))
    finally:
        watch.stopped.set()
        stop_side(process)
    latencies = [(seen - gen) / 1000 for gen, seen in watch.rows[STEADY]]
    steady_span = (max(s for _, s in watch.rows[STEADY]) - min(g for g, _ in watch.rows[STEADY])) / 1000
    burst_rate, burst_s = sorted(bursts)[len(bursts) // 2]
    result = {"side": side, "interval_ms": interval, "load_average": load, "startup_s": startup_s,
              "latency_p50_s": percentile(latencies, 50), "latency_p99_s": percentile(latencies, 99),
              "latency_max_s": max(latencies), "steady_rows": len(latencies),
              "steady_rows_per_s": len(latencies) / steady_span,
              "burst_rows": burst_rows, "burst_s": burst_s, "burst_rows_per_s": burst_rate,
              "bursts_rows_per_s": [rate for rate, _ in bursts],
              "latency_percentiles_s": np.percentile(latencies, range(101)).tolist()}
    print(f"{side:8} interval {interval} ms: latency p50 {result['latency_p50_s']:.2f} s, "
          f"p99 {result['latency_p99_s']:.2f} s; steady {result['steady_rows_per_s']:,.0f} rows/s "
          f"(offered {args.rate:,}); burst of {burst_rows:,} rows, median of {len(bursts)}: {burst_s:.1f} s = "
          f"{burst_rate:,.0f} rows/s (each: {', '.join(f'{r:,.0f}' for r, _ in bursts)}); start-up {startup_s:.1f} s (load {load:.1f})", flush=True)
    return result


def plot(cases: list[dict], path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, (lat, thr, dist) = plt.subplots(1, 3, figsize=(13, 4))
    labels = [f"{c['interval_ms'] / 1000:g} s\n{stat}" for c in cases for stat in ("p50", "p99")]
    draw_pairs(lat, labels, [c["seatide"][k] for c in cases for k in ("latency_p50_s", "latency_p99_s")],
               [c["hand"][k] for c in cases for k in ("latency_p50_s", "latency_p99_s")],
               "landing -> visible in the sink (s)")
    lat.set_title("end-to-end latency", fontsize=10)
    draw_pairs(thr, [f"{c['interval_ms'] / 1000:g} s" for c in cases],
               [c["seatide"]["burst_rows_per_s"] for c in cases], [c["hand"]["burst_rows_per_s"] for c in cases],
               "rows/s committed")
    thr.set_title(f"throughput draining a {cases[0]['seatide']['burst_rows']:,}-row backlog", fontsize=10)
    for c, style in zip(cases, ("-", "--", ":")):
        for side, color in (("seatide", "#2b7bba"), ("hand", "#777777")):
            dist.plot(c[side]["latency_percentiles_s"], range(101), linestyle=style, color=color,
                      label=f"{'SeaTide' if side == 'seatide' else 'hand-written'}, {c['interval_ms'] / 1000:g} s")
    dist.set_xlabel("latency (s)")
    dist.set_ylabel("rows seen by then (%)")
    dist.set_title("latency distribution (CDF)", fontsize=10)
    dist.legend(fontsize=7)
    fig.suptitle("STREAMING parquet files -> parquet: SeaTide vs hand-written Structured Streaming", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--intervals", default="1000,10000", help="checkpoint.interval / trigger, ms")
    parser.add_argument("--rate", type=int, default=20_000, help="rows/s landing in the latency phase")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--burst-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1, help="both sides per round, the order flipped each round")
    parser.add_argument("--bursts", type=int, default=5, help="bursts per side; the median is compared")
    args = parser.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for interval in (int(i) for i in args.intervals.split(",")):
            rounds = []
            for n in range(args.rounds):
                order = ("seatide", "hand") if n % 2 == 0 else ("hand", "seatide")
                rounds.append({side: run_side(side, interval, args, tmp, n) for side in order})
            case = {"interval_ms": interval, "rounds": rounds,
                    **{side: median_side([r[side] for r in rounds]) for side in ("seatide", "hand")}}
            for key in ("latency_p50_s", "latency_p99_s", "burst_rows_per_s"):
                # The median of per-round ratios: each round's two sides ran minutes apart at most.
                case[key + "_ratio"] = statistics.median(r["seatide"][key] / r["hand"][key] for r in rounds)
            case["load_average_1m"] = os.getloadavg()[0]
            print(f"interval {interval} ms, seatide / hand-written over {len(rounds)} round(s): latency p99 ratio "
                  f"{case['latency_p99_s_ratio']:.2f}x (goal <= 0.9x), burst throughput ratio "
                  f"{case['burst_rows_per_s_ratio']:.2f}x (goal >= 1.0x); "
                  f"load {case['load_average_1m']:.1f} on {os.cpu_count()} cores", flush=True)
            cases.append(case)
    command = "bench/streaming_vs_pyspark.py " + " ".join(sys.argv[1:])
    path = write_results("streaming_vs_pyspark", {"command": command, "rate_rows_per_s": args.rate,
                                                  "seconds": args.seconds, "cases": cases})
    png = path.removesuffix(".json") + ".png"
    print(f"wrote {path}" + (f" and {png}" if plot(cases, png) else " (no plot: pip install -e .[bench])"))


if __name__ == "__main__":
    main()
