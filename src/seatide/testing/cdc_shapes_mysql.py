"""MySQL shapes for the randomized CDC checks (issue 30, "Checks that reach these shapes").

    PYTHONPATH=src .venv/bin/python -m seatide.testing.cdc_shapes_mysql --seed 7 --transactions 200
                       [--merged] [--shards 3] [--statements 0.03]

``cdc_check`` streams one table from a session that logs whole rows. This workload streams
several tables ("shards") through one MySQL-CDC source from sessions the seed sets up:

* most log rows with whole images (``binlog_row_image = FULL``); some with ``MINIMAL`` images,
  whose updates carry only the changed columns (the reader reads the others by key) and whose
  deletes only the key;
* a key moved between shards in one transaction (DELETE from one, INSERT into another), the
  shape that needs ``__row_seq`` comparable across tables when the shards merge into one target;
* now and then (``statements``: the share of transactions) a session with ``binlog_format =
  STATEMENT`` changing a shard, which the binlog then holds without rows; and, rarer, a shard
  truncated, or dropped and created again. The stream cannot carry these: the job must fail
  naming the table and the way out, and the check then takes it (empty the targets, start over).
  A statement-logged change of a table the job does not capture must pass unnoticed.

The shards go into the Jdbc sink on PostgreSQL, each into its own target or all into one
(``merged``). At the end every target must equal its source. The runtime's multi-table routing,
the sink protocol and the crash points are ``cdc_shapes_pg_check``'s (``_Runner``).
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import tempfile
from decimal import Decimal

from seatide.testing.cdc_check import Endpoint, mysql_endpoint, postgres_endpoint
from seatide.testing.cdc_shapes_pg import Shard, ShapesWorkload, until_equal
from seatide.testing.cdc_shapes_pg_check import (ShapesOutcome, _Runner, _Scripted, restart_or_take_the_way_out,
                                                 write_while_streaming)

COLUMNS = "id BIGINT PRIMARY KEY, name VARCHAR(80), note TEXT, amount DECIMAL(20, 4)"
# Why a job may fail; the check then takes the way out the message names.
GONE = ("logged as text, without rows", "was truncated", "was dropped")
ROW_IMAGE = {"full": "SET SESSION binlog_row_image = 'FULL'", "minimal": "SET SESSION binlog_row_image = 'MINIMAL'"}


class MySqlShapes(ShapesWorkload):
    """Seeded statements over ``shards`` tables and one table the job does not capture; the changes
    inside a transaction are ``ShapesWorkload``'s, the sessions and tables MySQL's."""

    def __init__(self, rng: random.Random, shards: int = 3, statements: float = 0.03, drops: float = 0.01):
        self.rng, self.statements, self.drops = rng, statements, drops
        self.shards = [Shard(f"shard_{i}", "full") for i in range(shards)]
        self.next_id = 1

    def create(self, shard: Shard, rows: int = 10) -> list:
        shard.live.clear()
        return [f"DROP TABLE IF EXISTS {shard.name}", f"CREATE TABLE {shard.name} ({COLUMNS})",
                *[self.insert(shard) for _ in range(rows)]]

    def setup(self) -> list:
        return ["CREATE TABLE uncaptured (id BIGINT PRIMARY KEY, name VARCHAR(80))",
                *[s for shard in self.shards for s in self.create(shard)]]

    def insert(self, shard: Shard, key: int | None = None) -> tuple[str, tuple]:
        if key is None:
            key, self.next_id = self.next_id, self.next_id + 1
        shard.live.add(key)
        rng = self.rng
        note = None if rng.random() < 0.1 else "n" * rng.choice([3, 200, 3000])
        return (f"INSERT INTO {shard.name} VALUES (%s, %s, %s, %s)",
                (key, f"name {rng.randint(0, 10**6)}", note, f"{rng.randint(-10**6, 10**6)}.25"))

    def transaction(self) -> list:
        """One session's transaction: its settings first, then its statements."""
        rng, removal = self.rng, self.removal()
        if removal is not None:
            return removal
        if rng.random() < self.statements:
            shard = rng.choice(self.shards)
            session = ["SET SESSION binlog_format = 'STATEMENT'"]
            if not shard.live or rng.random() < 0.5:
                return [*session, self.insert(shard)]
            return [*session, self.update(shard, 0.3)]
        session = [ROW_IMAGE["minimal" if rng.random() < 0.4 else "full"]]
        if rng.random() < 0.05:     # statements logged as text for a table the job does not read
            session += ["SET SESSION binlog_format = 'STATEMENT'",
                        ("REPLACE INTO uncaptured VALUES (%s, %s)", (rng.randint(1, 50), "x"))]
            session.append("SET SESSION binlog_format = 'ROW'")
        statements = self.changes()
        return [*session, "BEGIN", *statements, "COMMIT"]

    def update(self, shard: Shard, choice: float) -> tuple[str, tuple]:
        """One column changed: a MINIMAL image leaves the others out (read by key)."""
        return (f"UPDATE {shard.name} SET name = %s WHERE id = %s",
                (f"seen {self.rng.random()}", self.rng.choice(sorted(shard.live))))


def job_text(source: Endpoint, target: Endpoint, shards: list[Shard], table: str, merged: bool) -> str:
    database = source.url.rsplit("/", 1)[1]
    names = ", ".join(f'"{database}.{s.name}"' for s in shards)
    sink_table = table if merged else f"{table}_${{table_name}}"
    return (f'env {{ job.mode = "STREAMING", checkpoint.interval = 1000, micro-batch.max-rows = 60 }}\n'
            f'source {{ MySQL-CDC {{ base-url = "{source.url}", username = "root", password = "",\n'
            f'  table-names = [{names}], snapshot.split.size = 7, server-id = "{5600 + secrets.randbelow(300)}" }} }}\n'
            f'sink {{ Jdbc {{ url = "{target.url}", user = "{target.user}", password = "", table = "{sink_table}",\n'
            f'  primary_keys = ["id"], enable_upsert = true }} }}\n')


def _rows(endpoint: Endpoint, table: str) -> dict:
    conn = endpoint.connect()
    try:
        cursor = conn.cursor()
        cursor.execute(f"SELECT id, name, note, amount FROM {table}")
        return {int(r[0]): (r[1], r[2], None if r[3] is None else Decimal(str(r[3]))) for r in cursor.fetchall()}
    finally:
        conn.close()


def run_mysql_shapes(spark, admin: Endpoint, target: Endpoint, *, seed: int, transactions: int, workdir: str,
                     merged: bool = False, shards: int = 3, statements: float = 0.03, script: list | None = None,
                     crashes: tuple | None = None, deadline_s: float = 300.0) -> ShapesOutcome:
    """Run the seeded workload (or, with ``script``, those transactions after the shards of
    ``shards`` are made, each then checked) on a fresh database of ``admin``'s server into
    ``target``; AssertionError unless every target ends equal to its source. Crash points come from
    a seeded draw, or, given ``crashes``, in that order (the n-th batch meets the n-th)."""
    rng = random.Random(seed)
    workload = MySqlShapes(rng, shards, statements)
    database = f"shapes_{seed}_{secrets.token_hex(3)}"
    admin.execute(f"CREATE DATABASE {database}")
    source = mysql_endpoint(int(admin.url.rsplit(":", 1)[1].split("/")[0]), database)
    source.execute(*workload.setup())
    table = f"shapes_{seed}_{secrets.token_hex(3)}"
    targets = [table] if merged else [f"{table}_{s.name}" for s in workload.shards]
    outcome = ShapesOutcome(seed)
    chooser = _Scripted(list(crashes)) if crashes is not None else random.Random(seed + 1)
    runner = _Runner(spark, job_text(source, target, workload.shards, table, merged), f"shm{secrets.token_hex(3)}",
                     workdir, chooser, outcome, holds_rows=lambda end: True)

    def restart_if_dead():
        restart_or_take_the_way_out(running, runner, GONE, lambda: target.execute(*[f"DROP TABLE IF EXISTS {name}"
                                                                                  for name in targets]), runner.start)

    def rows():
        try:
            got = {name: _rows(target, name) for name in targets}
        except Exception:  # noqa: BLE001 - the sink has not created a target yet
            got = None
        shard_rows = {s.name: _rows(source, s.name) for s in workload.shards}
        expected = ({table: {k: v for r in shard_rows.values() for k, v in r.items()}} if merged
                    else {f"{table}_{name}": r for name, r in shard_rows.items()})
        return got, expected

    running = [runner.start()]
    try:
        if script is not None:
            for step, transaction in enumerate([[], *script]):
                source.execute(*transaction)
                until_equal(rows, deadline_s, f"step {step} ({outcome})", restart_if_dead)
            return outcome
        write_while_streaming(workload, source, outcome, rng, transactions, deadline_s, restart_if_dead)
        until_equal(rows, deadline_s, f"seed {seed} ({outcome})", restart_if_dead)
        return outcome
    finally:
        running[0].stop()
        for name in targets:
            target.execute(f"DROP TABLE IF EXISTS {name}")
        admin.execute(f"DROP DATABASE IF EXISTS {database}")
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--merged", action="store_true", help="every shard into one target table")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--statements", type=float, default=0.03,
                        help="share of transactions from a session with binlog_format = STATEMENT")
    args = parser.parse_args()
    from seatide.runtime.session import build_session
    from seatide.testing.servers import start_private_mariadb, stop_private_mariadb

    workdir = tempfile.mkdtemp(prefix="cdc-shapes-mysql-")
    os.makedirs(os.path.join(workdir, "server"))
    server, process = start_private_mariadb(os.path.join(workdir, "server"))
    spark = build_session("seatide-cdc-shapes-mysql", {"spark.master": "local[2]"})
    try:
        outcome = run_mysql_shapes(spark, mysql_endpoint(server.port, "test"), postgres_endpoint(5432, "test"),
                                   seed=args.seed, transactions=args.transactions, merged=args.merged,
                                   shards=args.shards, statements=args.statements,
                                   workdir=os.path.join(workdir, "run"))
        print(f"mysql shapes -> postgres ({'merged' if args.merged else 'a target each'}): targets equal "
              f"sources; {outcome}", flush=True)
    finally:
        spark.stop()
        stop_private_mariadb(process)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
