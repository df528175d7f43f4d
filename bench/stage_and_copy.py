"""What a keyless MySQL/MariaDB target's "second copy" costs: Spark writing each table straight
into its InnoDB target (what a program by hand does, and what publishing a staged table by a
rename would cost) vs SeaTide's way, Spark writing a MyISAM staging table and the apply copying
it into the target (``INSERT ... SELECT``), alternating in one process.

    PYTHONPATH=src .venv/bin/python bench/stage_and_copy.py [--tables 20] [--rows 20000] [--rounds 4]

Prints each side's wall time and the MariaDB server's CPU time (from /proc), their ratios, and
the load it ran under. Issue 33 names "no second copy for tables the job created empty" as the
way to the 100-table goal; this measures what that way could save at most.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import pymysql

from seatide.runtime.session import build_session

RESULTS = os.environ.get("SEATIDE_BENCH_RESULTS") or os.path.join(os.path.dirname(__file__), "results")
URL = "jdbc:mysql://127.0.0.1:3306/bench_copy?permitMysqlScheme"
COLUMNS = "id bigint, name varchar(64), amount decimal(12,2), at datetime(6)"


def _server_cpu() -> float:
    """The MariaDB server's user + system CPU seconds so far."""
    pid = int(subprocess.check_output(["pgrep", "-o", "mariadbd"]).strip())
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    db = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    cur = db.cursor()
    cur.execute("DROP DATABASE IF EXISTS bench_copy")
    cur.execute("CREATE DATABASE bench_copy")
    cur.execute("USE bench_copy")
    spark = build_session("stage-and-copy", {"spark.master": "local[2]"})
    frame = spark.range(args.rows, numPartitions=2).selectExpr(
        "id", "concat('name', id) AS name", "CAST(id % 1000 / 7 AS DECIMAL(12,2)) AS amount",
        "TIMESTAMP'2026-01-01 00:00:00' AS at")
    properties = {"user": "root", "password": "", "driver": "org.mariadb.jdbc.Driver",
                  "rewriteBatchedStatements": "true", "batchsize": "1000"}

    def direct(i: int) -> None:
        cur.execute(f"CREATE TABLE t{i} ({COLUMNS}) ENGINE=InnoDB")
        frame.write.jdbc(URL, f"t{i}", mode="append", properties=properties)

    def staged(i: int) -> None:
        cur.execute(f"CREATE TABLE t{i} ({COLUMNS}) ENGINE=InnoDB")
        cur.execute(f"CREATE TABLE s{i} ({COLUMNS}) ENGINE=MyISAM")
        frame.write.jdbc(URL, f"s{i}", mode="append", properties=properties)
        cur.execute(f"INSERT INTO t{i} SELECT * FROM s{i}")
        cur.execute(f"DROP TABLE s{i}")

    sides = {"direct": direct, "staged_then_copied": staged}
    wall: dict[str, list[float]] = {k: [] for k in sides}
    server: dict[str, list[float]] = {k: [] for k in sides}
    loads = []
    direct(0)      # warm-up: the JDBC driver's classes, the write's code paths
    cur.execute("DROP TABLE t0")
    try:
        for round_no in range(args.rounds):
            for name in (list(sides) if round_no % 2 == 0 else list(reversed(sides))):
                started, cpu = time.perf_counter(), _server_cpu()
                for i in range(args.tables):
                    sides[name](i)
                wall[name].append(time.perf_counter() - started)
                server[name].append(_server_cpu() - cpu)
                for i in range(args.tables):
                    cur.execute(f"SELECT COUNT(*) FROM t{i}")
                    assert cur.fetchone()[0] == args.rows
                    cur.execute(f"DROP TABLE t{i}")
            loads.append(os.getloadavg()[0])
            print(f"round {round_no + 1}: " + ", ".join(f"{k} {wall[k][-1]:.2f} s wall, {server[k][-1]:.2f} s server"
                                                        for k in sides) + f" (load {loads[-1]:.1f})", flush=True)
    finally:
        cur.execute("DROP DATABASE IF EXISTS bench_copy")
        spark.stop()
    result = {"tables": args.tables, "rows_per_table": args.rows, "wall_s": wall, "server_cpu_s": server,
              "load_average_1m": loads}
    for measure, values in (("wall", wall), ("server CPU", server)):
        per_round = statistics.median(s / d for d, s in zip(values["direct"], values["staged_then_copied"]))
        result[f"{measure.replace(' ', '_')}_ratio_staged_to_direct"] = per_round
        print(f"{measure}: direct {statistics.median(values['direct']):.2f} s, staged then copied "
              f"{statistics.median(values['staged_then_copied']):.2f} s: staged/direct {per_round:.2f}x "
              f"(median of per-round ratios)")
    print(f"the baseline is direct (Spark into the InnoDB target); load {min(loads):.1f}-{max(loads):.1f} "
          f"on {os.cpu_count()} cores")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "stage_and_copy.json"), "w") as handle:
        json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
