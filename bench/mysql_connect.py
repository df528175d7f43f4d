"""Opening a MySQL/MariaDB connection: PyMySQL as it comes vs SeaTide's (one preferred-TLS
context per process, connectors/mysql_client.py), alternating rounds in one process.

    .venv/bin/python bench/mysql_connect.py [--url jdbc:mysql://127.0.0.1:3306/test] [--rounds 5] [--connects 50]

Prints CPU and wall time per connect for each side, the ratio, and the load it ran under.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import pymysql

from seatide.connectors import mysql_client
from seatide.connectors.jdbc.url import JdbcUrl


def _per_connect(connect, url: JdbcUrl, n: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        connect(host=url.host, port=url.port, user="root", password="", database=url.database).close()
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="jdbc:mysql://127.0.0.1:3306/test")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connects", type=int, default=50)
    args = parser.parse_args()
    url = JdbcUrl.parse(args.url)
    sides = {"pymysql.connect": pymysql.connect, "mysql_client.connect": mysql_client.connect}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, connect in sides.items():
            results[name].append(_per_connect(connect, url, args.connects))
    medians = {name: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
               for name, rows in results.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name:22s} wall {wall * 1000:7.2f} ms  cpu {cpu * 1000:7.2f} ms per connect")
    (base_wall, base_cpu), (ours_wall, ours_cpu) = medians.values()
    print(f"ratio (SeaTide / PyMySQL): wall {ours_wall / base_wall:.2f}x, cpu {ours_cpu / base_cpu:.2f}x; "
          f"load {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.connects} connects each")


if __name__ == "__main__":
    main()
